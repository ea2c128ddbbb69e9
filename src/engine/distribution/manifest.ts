import { createHash } from 'node:crypto';
import { invalidParameter, notFound } from '../../common/errors.js';
import { isIndexType, isSchema1Type, MediaTypes } from './media-types.js';
import type {
  Descriptor,
  FetchedManifest,
  ImageIndex,
  ImageManifest,
  Platform,
  Schema1Manifest,
} from './types.js';

function sha256(b: Uint8Array): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

function b64urlDecode(s: string): Buffer {
  return Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

/**
 * The signed payload of a schema 1 manifest (libtrust's JWS "pretty" form): the bytes up to
 * `formatLength` followed by the decoded `formatTail` of the first signature's protected header.
 * Unsigned manifests are their own payload.
 */
export function schema1Payload(bytes: Buffer, parsed: Schema1Manifest): Buffer {
  const sig = parsed.signatures?.[0] as { protected?: string } | undefined;
  if (!sig?.protected) return bytes;
  let header: { formatLength?: number; formatTail?: string };
  try {
    header = JSON.parse(b64urlDecode(sig.protected).toString('utf8'));
  } catch {
    throw invalidParameter('invalid schema 1 manifest signature header');
  }
  if (typeof header.formatLength !== 'number' || typeof header.formatTail !== 'string')
    throw invalidParameter('invalid schema 1 manifest signature header');
  return Buffer.concat([bytes.subarray(0, header.formatLength), b64urlDecode(header.formatTail)]);
}

/**
 * Parse manifest bytes answered with `contentType` (sniffed from the document when the header is
 * missing or generic), compute their digest, and check it against `expected` (pull by digest).
 */
export function parseManifest(
  bytes: Buffer,
  contentType: string | undefined,
  expected?: string,
): FetchedManifest {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw invalidParameter('the registry answered a manifest that is not JSON');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw invalidParameter('invalid manifest');
  let mediaType = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const known = [
    MediaTypes.dockerManifest,
    MediaTypes.dockerList,
    MediaTypes.ociManifest,
    MediaTypes.ociIndex,
    MediaTypes.schema1,
    MediaTypes.schema1Signed,
  ] as string[];
  if (!known.includes(mediaType)) {
    if (typeof doc.mediaType === 'string' && known.includes(doc.mediaType)) mediaType = doc.mediaType;
    else if (doc.schemaVersion === 1)
      mediaType = doc.signatures ? MediaTypes.schema1Signed : MediaTypes.schema1;
    else if (Array.isArray(doc.manifests)) mediaType = MediaTypes.ociIndex;
    else if (doc.config) mediaType = MediaTypes.ociManifest;
    else throw invalidParameter(`unsupported manifest media type ${JSON.stringify(contentType ?? '')}`);
  }
  if (isSchema1Type(mediaType)) {
    const schema1 = doc as unknown as Schema1Manifest;
    if (!Array.isArray(schema1.fsLayers) || !Array.isArray(schema1.history) || !schema1.fsLayers.length)
      throw invalidParameter('invalid schema 1 manifest');
    if (schema1.fsLayers.length !== schema1.history.length)
      throw invalidParameter('length of history not equal to number of layers');
    const digest = sha256(schema1Payload(bytes, schema1));
    const whole = sha256(bytes);
    if (expected && expected !== digest && expected !== whole)
      throw invalidParameter(`manifest verification failed for digest ${expected}`);
    return { kind: 'schema1', schema1, digest: expected ?? digest, mediaType, bytes };
  }
  const digest = sha256(bytes);
  if (expected && expected !== digest)
    throw invalidParameter(`manifest verification failed for digest ${expected}`);
  if (isIndexType(mediaType)) {
    const index = doc as unknown as ImageIndex;
    if (!Array.isArray(index.manifests)) throw invalidParameter('invalid manifest list');
    return { kind: 'index', index, digest, mediaType, bytes };
  }
  const manifest = doc as unknown as ImageManifest;
  if (!manifest.config || typeof manifest.config.digest !== 'string' || !Array.isArray(manifest.layers))
    throw invalidParameter('invalid image manifest');
  return { kind: 'manifest', manifest, digest, mediaType, bytes };
}

/**
 * The entry of an index for a platform, as dockerd picks it: among the entries `rank` accepts
 * (a number: lower is better, containerd's ordering of the platforms the wanted one runs), the
 * best, the index's order breaking ties. NotFound in dockerd's words when none fits.
 */
export function choosePlatform(
  index: ImageIndex,
  rank: (p: Platform) => number | undefined,
  wanted: string,
): Descriptor {
  let best: Descriptor | undefined;
  let bestRank = Number.POSITIVE_INFINITY;
  for (const d of index.manifests) {
    if (
      d.platform === undefined ||
      !(
        d.mediaType === undefined ||
        d.mediaType === MediaTypes.dockerManifest ||
        d.mediaType === MediaTypes.ociManifest ||
        isSchema1Type(d.mediaType)
      )
    )
      continue;
    const r = rank(d.platform);
    if (r !== undefined && r < bestRank) {
      best = d;
      bestRank = r;
    }
  }
  if (!best) throw notFound(`no matching manifest for ${wanted} in the manifest list entries`);
  return best;
}

/** One layer of a schema 1 image, bottom first. */
export interface Schema1Layer {
  blobSum: string;
  /** history entry's v1Compatibility says `throwaway`: no layer (nothing to download). */
  throwaway: boolean;
  v1: Record<string, unknown>;
}

/**
 * The layers of a schema 1 manifest bottom first, as moby's pullSchema1 reads them: history and
 * fsLayers run top first; consecutive duplicates of an ID are removed (fixManifestLayers).
 */
export function schema1Layers(m: Schema1Manifest): Schema1Layer[] {
  const out: Schema1Layer[] = [];
  let lastId: unknown;
  for (let i = m.history.length - 1; i >= 0; i--) {
    let v1: Record<string, unknown>;
    try {
      v1 = JSON.parse((m.history[i] as { v1Compatibility: string }).v1Compatibility);
    } catch {
      throw invalidParameter('invalid schema 1 manifest history');
    }
    if (v1.id !== undefined && v1.id === lastId) continue;
    lastId = v1.id;
    out.push({
      blobSum: (m.fsLayers[i] as { blobSum: string }).blobSum,
      throwaway: v1.throwaway === true,
      v1,
    });
  }
  return out;
}

/**
 * The image config moby makes from a schema 1 manifest (MakeConfigFromV1Config): the top
 * history entry without its v1 fields, plus rootfs (the layers' diff IDs, throwaway ones left
 * out) and history; keys in Go's map order (sorted).
 */
export function schema1Config(layers: Schema1Layer[], diffIds: string[]): Buffer {
  const top = layers[layers.length - 1];
  if (!top) throw invalidParameter('invalid schema 1 manifest');
  const config: Record<string, unknown> = { ...top.v1 };
  for (const k of ['id', 'parent', 'Size', 'parent_id', 'layer_id', 'throwaway']) delete config[k];
  config.rootfs = { type: 'layers', diff_ids: diffIds };
  config.history = layers.map((l) => {
    const h: Record<string, unknown> = {};
    if (l.v1.created !== undefined) h.created = l.v1.created;
    if (l.v1.author) h.author = l.v1.author;
    const cmd = (l.v1.container_config as { Cmd?: unknown } | undefined)?.Cmd;
    if (Array.isArray(cmd) && cmd.length) h.created_by = cmd.join(' ');
    if (l.v1.comment) h.comment = l.v1.comment;
    if (l.throwaway) h.empty_layer = true;
    return h;
  });
  const sorted: Record<string, unknown> = {};
  for (const k of Object.keys(config).sort()) sorted[k] = config[k];
  return Buffer.from(JSON.stringify(sorted));
}
