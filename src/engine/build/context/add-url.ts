import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { invalidParameter } from '../../../common/errors.js';
import { fetchBounded } from './remote.js';
import { readAllBounded } from './sniff.js';

/** The most an ADD of a URL downloads (the content is held in memory as an inline file). */
const ADD_URL_LIMIT = 512 * 1024 * 1024;
const ADD_URL_TIMEOUT_MS = 30 * 60 * 1000;

/** A file ADD downloaded: an inline file for the copy plan. */
export interface DownloadedFile {
  /** From the URL's path (or Content-Disposition), else the destination's base name. */
  name: string;
  content: Buffer;
  /** 0600, as dockerd gives downloaded files. */
  mode: number;
  /** The response's Last-Modified, when it has one. */
  mtime?: Date;
}

/** The file name a download gets (dockerd's getFilenameForDownload). */
function nameFor(url: URL, disposition: string | undefined): string {
  const path = decodeURIComponent(url.pathname);
  if (path !== '' && !path.endsWith('/')) {
    const base = posix.basename(path);
    if (base) return base;
  }
  const m = disposition && /filename\*?=(?:"([^"]*)"|([^;\s]*))/i.exec(disposition);
  const given = m ? (m[1] ?? m[2] ?? '') : '';
  if (given && !given.endsWith('/')) return posix.basename(given);
  return '';
}

/**
 * ADD <http(s) URL>: download it (redirects followed, bounded in size and time, aborted with
 * `signal`), check `--checksum=sha256:<hex>` when given, and name it as dockerd does: the URL's
 * last path component, else the Content-Disposition file name, else (for a destination that is a
 * file) the destination's; a destination directory with no name to give is dockerd's error.
 */
export async function fetchAddUrl(
  url: string,
  signal: AbortSignal,
  checksum?: string,
  dest?: string,
  limit = ADD_URL_LIMIT,
): Promise<DownloadedFile> {
  let expected: string | undefined;
  if (checksum !== undefined) {
    const m = /^sha256:([0-9a-f]{64})$/.exec(checksum);
    if (!m)
      throw invalidParameter(
        `invalid checksum digest format: ${JSON.stringify(checksum)} (want sha256:<64 hex digits>)`,
      );
    expected = m[1];
  }
  let headers: { disposition?: string; lastModified?: string } = {};
  const timed = AbortSignal.any([signal, AbortSignal.timeout(ADD_URL_TIMEOUT_MS)]);
  const content = await readAllBounded(
    fetchBounded(url, {
      signal: timed,
      limit,
      onResponse: (res) => {
        headers = {
          disposition: res.headers['content-disposition'],
          lastModified: res.headers['last-modified'],
        };
      },
    }),
    limit,
    () => invalidParameter(`${url}: more than the limit of ${limit} bytes`),
  );
  if (expected !== undefined) {
    const got = createHash('sha256').update(content).digest('hex');
    if (got !== expected) throw invalidParameter(`digest mismatch sha256:${got}: sha256:${expected}`);
  }
  let name = nameFor(new URL(url), headers.disposition);
  if (!name) {
    if (!dest || dest.endsWith('/')) throw invalidParameter(`cannot determine filename for source ${url}`);
    name = posix.basename(dest);
  }
  const mtime = headers.lastModified ? new Date(headers.lastModified) : undefined;
  return {
    name,
    content,
    mode: 0o600,
    ...(mtime && Number.isFinite(mtime.getTime()) ? { mtime } : {}),
  };
}
