import { errorMessage, invalidParameter } from '../../common/errors.js';
import { parseNormalizedNamed } from '../../common/reference.js';
import { readBody } from '../../http/body.js';
import { type JsonMessageStream, progressBar, startJsonStream } from '../../http/stream.js';
import { type AuthConfig, decodeAuthHeader } from '../distribution/index.js';
import type { ImageService, PushMessage } from '../images/images.service.js';
import type { ApiContext, ApiRouter } from './context.js';

/** What the push route needs of the image service. */
export type PushBackend = Pick<ImageService, 'push'>;

/**
 * Credentials of a push or pull: `X-Registry-Auth`, or (moby's old form) the JSON body when the
 * header is absent — 400 `Bad parameters and missing X-Registry-Auth: EOF` when there is neither.
 */
export async function registryAuth(ctx: ApiContext): Promise<AuthConfig> {
  const header = ctx.req.headers['x-registry-auth'];
  const value = Array.isArray(header) ? header[0] : header;
  if (value) return decodeAuthHeader(value);
  const body = (await readBody(ctx.req, 64 * 1024)).toString('utf8').trim();
  let parsed: unknown;
  try {
    if (!body) throw new Error('EOF');
    parsed = JSON.parse(body);
  } catch (err) {
    throw invalidParameter(`Bad parameters and missing X-Registry-Auth: ${errorMessage(err)}`);
  }
  return decodeAuthHeader(Buffer.from(JSON.stringify(parsed)).toString('base64'));
}

/** One push message as dockerd's JSON stream has it. */
export function writePushMessage(out: JsonMessageStream, m: PushMessage): void {
  switch (m.kind) {
    case 'status':
      out.write({ status: m.status });
      return;
    case 'aux':
      out.write({ progressDetail: {}, aux: { Tag: m.tag, Digest: m.digest, Size: m.size } });
      return;
    case 'layer':
      if (m.current !== undefined) {
        const progressDetail: Record<string, number> = { current: m.current };
        if (m.total !== undefined) progressDetail.total = m.total;
        out.write({ status: m.status, progressDetail, progress: progressBar(m.current, m.total), id: m.id });
      } else {
        out.write({ status: m.status, progressDetail: {}, id: m.id });
      }
      return;
  }
}

export function registerPushRoutes(router: ApiRouter, images: PushBackend): void {
  router.post('/images/{name*}/push', async (ctx) => {
    const name = ctx.params.name ?? '';
    const auth = await registryAuth(ctx);
    // a malformed name is the request's fault: a status, before anything streams
    parseNormalizedNamed(name);
    const tag = ctx.query.get('tag') || undefined;
    const abort = new AbortController();
    ctx.res.on('close', () => {
      if (!ctx.res.writableFinished) abort.abort(new Error('the client went away'));
    });
    const stream = startJsonStream(ctx.res);
    try {
      await images.push({
        name,
        tag,
        auth,
        signal: abort.signal,
        onMessage: (m) => writePushMessage(stream, m),
      });
    } catch (err) {
      stream.error(errorMessage(err));
    }
    stream.end();
  });
}
