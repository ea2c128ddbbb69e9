import { get as httpGet, type IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { BerthError, type ErrorKind, invalidParameter } from '../../common/errors.js';

const MAX_REDIRECTS = 10;

/** What an import from a URL reads: the response body and its declared length. */
export interface UrlSource {
  url: URL;
  body: IncomingMessage;
  length?: number;
}

/** dockerd's kinds for a failed GET (remotecontext.GetWithStatusError). */
function statusKind(status: number): ErrorKind {
  if (status === 404) return 'NotFound';
  if (status === 401) return 'Unauthorized';
  if (status === 403) return 'Forbidden';
  return 'InvalidParameter';
}

function request(url: URL, signal?: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const get = url.protocol === 'https:' ? httpsGet : httpGet;
    const req = get(url, { headers: { 'User-Agent': 'berth' }, ...(signal ? { signal } : {}) }, resolve);
    // the URL is the client's: one that cannot be reached is its error (dockerd answers 500)
    req.on('error', (err) => reject(invalidParameter(`Get "${url}": ${err.message}`)));
  });
}

/**
 * GET an http(s) URL for `docker import URL` (and a build's `remote` and ADD URLs), following
 * redirects, as dockerd does: any port (node's fetch refuses the Fetch standard's "bad ports"), a
 * status of 400 or more fails with the body's text (404 is a 404). `signal` aborts the request
 * and its body.
 */
export async function openUrl(source: string, signal?: AbortSignal): Promise<UrlSource> {
  let url: URL;
  try {
    url = new URL(source.includes('://') ? source : `http://${source}`);
  } catch {
    throw invalidParameter(`invalid import source URL ${JSON.stringify(source)}`);
  }
  for (let hop = 0; ; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw invalidParameter(`Get "${url}": unsupported protocol scheme "${url.protocol.slice(0, -1)}"`);
    }
    const res = await request(url, signal);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      res.resume();
      if (hop >= MAX_REDIRECTS)
        throw invalidParameter(`Get "${url}": stopped after ${MAX_REDIRECTS} redirects`);
      url = new URL(location, url);
      continue;
    }
    if (status >= 400) {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of res) {
        if (size < 4096) chunks.push(c as Buffer);
        size += (c as Buffer).length;
      }
      const text = Buffer.concat(chunks).toString('utf8').slice(0, 4096).trim();
      throw new BerthError(
        statusKind(status),
        `failed to GET ${url} with status ${status} ${res.statusMessage ?? ''}: ${text}`,
      );
    }
    const length = Number(res.headers['content-length'] ?? Number.NaN);
    return { url, body: res, length: Number.isFinite(length) ? length : undefined };
  }
}
