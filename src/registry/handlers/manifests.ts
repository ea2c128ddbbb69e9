import type { IncomingMessage } from 'node:http';
import { type ParsedDigest, tryParseDigest } from '../../common/digest.js';
import { readBody } from '../../http/body.js';
import { sendEmpty } from '../../http/server.js';
import { type RequestContext, urlFor } from '../context.js';
import { type ErrorEntry, RegistryError } from '../errors.js';
import { MediaTypes } from '../manifests/types.js';
import { bareMediaType, parseManifest } from '../manifests/validate.js';
import { checkTag, parseReference, type Reference, tryParseReference } from '../names.js';
import { notify } from '../notifications/notify.js';

function manifestUnknown(reference: string, message = 'manifest unknown to registry'): RegistryError {
  return new RegistryError(
    'MANIFEST_UNKNOWN',
    message,
    reference.includes(':') ? { digest: reference } : { tag: reference },
  );
}

/** The media types a request accepts (Accept headers, comma lists, parameters dropped). */
function acceptedTypes(req: IncomingMessage): Set<string> {
  const out = new Set<string>();
  const raw = req.headersDistinct?.accept ?? (req.headers.accept ? [req.headers.accept] : []);
  for (const header of raw) for (const part of header.split(',')) out.add(bareMediaType(part));
  return out;
}

/** GET and HEAD /v2/<name>/manifests/<reference>. */
export async function getManifest(ctx: RequestContext): Promise<void> {
  const { req, res, state, name } = ctx;
  // A reference that is neither a valid tag nor a valid digest names no manifest: 404, as the
  // spec's manifest GET/HEAD knows no other answer (the conformance suite asks for one).
  const ref = tryParseReference(ctx.param);
  if (!ref) throw manifestUnknown(ctx.param);
  let d: ParsedDigest | undefined;
  if (ref.kind === 'digest') d = ref.digest;
  else {
    d = state.proxy
      ? await state.proxy.resolveTag(name, ref.tag)
      : await state.store.resolveTag(name, ref.tag);
    if (!d) throw manifestUnknown(ref.tag);
  }
  const info = state.proxy ? await state.proxy.manifest(name, d) : await state.store.getManifest(name, d);
  if (!info) throw manifestUnknown(ctx.param);

  // Content negotiation, as the reference registry (distribution 2.8) does it: OCI types are
  // only served to clients that accept them; Docker schema 2 types are rewritten to schema 1 for
  // clients that do not accept them when fetched by tag, which the reference fails (400) without
  // a schema-1 signing setup, and so does berth.
  const accepts = acceptedTypes(req);
  if (info.mediaType === MediaTypes.ociManifest && !accepts.has(MediaTypes.ociManifest)) {
    throw manifestUnknown(ctx.param, 'OCI manifest found, but accept header does not support OCI manifests');
  }
  if (info.mediaType === MediaTypes.ociIndex && !accepts.has(MediaTypes.ociIndex)) {
    throw manifestUnknown(ctx.param, 'OCI index found, but accept header does not support OCI indexes');
  }
  if (
    ref.kind === 'tag' &&
    ((info.mediaType === MediaTypes.dockerSchema2 && !accepts.has(MediaTypes.dockerSchema2)) ||
      (info.mediaType === MediaTypes.dockerManifestList && !accepts.has(MediaTypes.dockerManifestList)))
  ) {
    throw new RegistryError(
      'MANIFEST_INVALID',
      `manifest invalid: ${info.mediaType} found, the client does not accept it and conversion to schema 1 is not supported`,
      {},
    );
  }

  const etag = `"${info.digest}"`;
  res.setHeader('Docker-Content-Digest', info.digest);
  res.setHeader('ETag', etag);
  const inm = req.headers['if-none-match'];
  if (inm?.split(',').some((t) => t.trim() === etag || t.trim() === '*')) {
    sendEmpty(res, 304);
    return;
  }
  await notify(ctx, 'pull', {
    ...manifestTarget(name, info.mediaType, info.digest, info.content.length, ref),
    manifest: info.content,
  });
  res.statusCode = 200;
  res.setHeader('Content-Type', info.mediaType);
  res.setHeader('Content-Length', info.content.length);
  if (req.method === 'HEAD') res.end();
  else res.end(info.content);
}

/** The manifest body, at most `limit` bytes (413 SIZE_INVALID beyond, declared or streamed). */
function readManifestBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return readBody(
    req,
    limit,
    () =>
      new RegistryError(
        'SIZE_INVALID',
        `manifest exceeds the maximum size of ${limit} bytes`,
        { limit },
        413,
      ),
  );
}

/** PUT /v2/<name>/manifests/<reference>. */
export async function putManifest(ctx: RequestContext): Promise<void> {
  const { req, state, name, query } = ctx;
  const ref = parseReference(ctx.param);
  const extraTags = query.getAll('tag').map((t) => checkTag(t));
  const body = await readManifestBody(req, state.manifestMaxBytes);
  const info = parseManifest(req.headers['content-type'], body);

  if (ref.kind === 'digest' && ref.digest.digest !== info.digest) {
    throw new RegistryError(
      'DIGEST_INVALID',
      `manifest digest ${info.digest} does not match ${ref.digest.digest}`,
      {
        digest: ref.digest.digest,
      },
    );
  }
  if (info.schema1) {
    if (info.schema1.name !== name) {
      throw new RegistryError(
        'NAME_INVALID',
        `manifest name ${JSON.stringify(info.schema1.name)} does not match the repository ${name}`,
        {
          name: info.schema1.name,
        },
      );
    }
    if (ref.kind === 'tag' && info.schema1.tag !== ref.tag) {
      throw new RegistryError(
        'TAG_INVALID',
        `manifest tag ${JSON.stringify(info.schema1.tag)} does not match ${ref.tag}`,
        {
          tag: info.schema1.tag,
        },
      );
    }
  }

  // The referenced blobs are held while they are checked and the manifest written: a garbage
  // collection running in this process keeps them (gc/guard.ts).
  const referenced = [info.digest, ...info.blobs, ...info.manifests];
  const canonical = await state.gcGuard.hold(referenced, async () => {
    // Every referenced blob and child manifest must be in the repository: one error per missing one.
    const missing: ErrorEntry[] = [];
    const blobChecks = info.blobs.map(async (digest) => {
      const d = tryParseDigest(digest);
      if (!d || !(await state.store.repoBlobStat(name, d))) {
        missing.push({ code: 'BLOB_UNKNOWN', message: 'blob unknown to registry', detail: { digest } });
      }
    });
    const manifestChecks = info.manifests.map(async (digest) => {
      const d = tryParseDigest(digest);
      if (!d || !(await state.store.getManifest(name, d))) {
        missing.push({
          code: 'MANIFEST_BLOB_UNKNOWN',
          message: 'manifest references a manifest unknown to the repository',
          detail: { digest },
        });
      }
    });
    await Promise.all([...blobChecks, ...manifestChecks]);
    if (missing.length > 0) {
      const order = [...info.blobs, ...info.manifests];
      missing.sort(
        (a, b) =>
          order.indexOf((a.detail as { digest: string }).digest) -
          order.indexOf((b.detail as { digest: string }).digest),
      );
      throw RegistryError.many(missing, 400);
    }

    const d = tryParseDigest(info.digest);
    if (!d) throw new RegistryError('MANIFEST_INVALID', 'cannot compute the manifest digest');
    const canonical = info.schema1 ? Buffer.from(canonicalSchema1(info.content, body)) : body;
    await state.store.putManifest(name, info, canonical);
    const tags = ref.kind === 'tag' ? [ref.tag, ...extraTags] : extraTags;
    for (const tag of new Set(tags)) await state.store.tag(name, tag, d);
    return canonical;
  });

  const headers: Record<string, string> = {
    Location: urlFor(ctx, `/v2/${name}/manifests/${info.digest}`),
    'Docker-Content-Digest': info.digest,
  };
  if (info.subject) headers['OCI-Subject'] = info.subject.digest;
  await notify(ctx, 'push', {
    ...manifestTarget(name, info.mediaType, info.digest, canonical.length, ref),
    manifest: canonical,
  });
  sendEmpty(ctx.res, 201, headers);
}

/** The JWS payload of a signed schema-1 manifest (what its digest names). */
function canonicalSchema1(_content: Buffer, body: Buffer): Buffer {
  // parseManifest already verified the signatures; recompute the payload from the body.
  const doc = JSON.parse(body.toString('utf8')) as { signatures: Array<{ protected: string }> };
  const first = doc.signatures[0];
  if (!first) return body;
  const prot = JSON.parse(Buffer.from(first.protected, 'base64url').toString('utf8')) as {
    formatLength: number;
    formatTail: string;
  };
  return Buffer.concat([body.subarray(0, prot.formatLength), Buffer.from(prot.formatTail, 'base64url')]);
}

/** DELETE /v2/<name>/manifests/<reference>. */
export async function deleteManifest(ctx: RequestContext): Promise<void> {
  const { state, name } = ctx;
  if (!state.deleteEnabled)
    throw new RegistryError('UNSUPPORTED', 'The operation is unsupported: deletion is disabled');
  const ref = parseReference(ctx.param);
  if (ref.kind === 'tag') {
    if (!state.deleteTags) {
      throw new RegistryError(
        'UNSUPPORTED',
        'The operation is unsupported: a manifest cannot be deleted by tag; delete it by digest',
        { tag: ref.tag },
      );
    }
    const d = await state.store.resolveTag(name, ref.tag);
    if (!d || !(await state.store.untag(name, ref.tag))) throw manifestUnknown(ref.tag);
    await notify(ctx, 'delete', { tag: ref.tag });
    sendEmpty(ctx.res, 202);
    return;
  }
  // The tags that go with it: one delete event each after the manifest's (as the reference).
  const tags = state.notifier ? await state.store.tagsPointingTo(name, ref.digest) : [];
  if (!(await state.store.deleteManifest(name, ref.digest))) throw manifestUnknown(ref.digest.digest);
  await notify(ctx, 'delete', { digest: ref.digest.digest });
  for (const tag of tags) await notify(ctx, 'delete', { tag });
  sendEmpty(ctx.res, 202);
}

/** The target of a manifest event: its URL by digest, the tag when the request named one. */
function manifestTarget(name: string, mediaType: string, digest: string, size: number, ref: Reference) {
  return {
    mediaType,
    size,
    digest,
    length: size,
    urlPath: `/v2/${name}/manifests/${digest}`,
    tag: ref.kind === 'tag' ? ref.tag : undefined,
  };
}
