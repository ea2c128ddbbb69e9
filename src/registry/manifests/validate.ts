import { sha256Digest, tryParseDigest } from '../../common/digest.js';
import { RegistryError } from '../errors.js';
import { Schema1Error, verifySchema1 } from './schema1.js';
import { type Descriptor, type ManifestInfo, MediaTypes } from './types.js';

const SCHEMA1_TYPES = new Set<string>([
  MediaTypes.dockerSchema1,
  MediaTypes.dockerSchema1Signed,
  'application/json',
]);
const V2_TYPES = new Set<string>([
  MediaTypes.dockerSchema2,
  MediaTypes.dockerManifestList,
  MediaTypes.ociManifest,
  MediaTypes.ociIndex,
]);

function invalid(message: string, detail?: unknown): RegistryError {
  return new RegistryError('MANIFEST_INVALID', message, detail);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The media type part of a Content-Type or Accept entry, lowercased, without parameters. */
export function bareMediaType(value: string | undefined): string {
  if (!value) return '';
  const semi = value.indexOf(';');
  return (semi >= 0 ? value.slice(0, semi) : value).trim().toLowerCase();
}

function checkStringMap(v: unknown, what: string): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v) || Object.values(v).some((x) => typeof x !== 'string')) {
    throw invalid(`${what} must be a map of strings`);
  }
  return v as Record<string, string>;
}

function checkDescriptor(v: unknown, what: string): Descriptor {
  if (!isObject(v)) throw invalid(`${what} is not a descriptor object`);
  const { mediaType, digest, size, urls, artifactType } = v;
  if (typeof mediaType !== 'string' || mediaType === '') throw invalid(`${what} has no mediaType`);
  if (typeof digest !== 'string' || !tryParseDigest(digest)) {
    throw invalid(`${what} has an invalid digest ${JSON.stringify(digest)}`);
  }
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
    throw invalid(`${what} has an invalid size ${JSON.stringify(size)}`);
  }
  if (urls !== undefined && (!Array.isArray(urls) || urls.some((u) => typeof u !== 'string'))) {
    throw invalid(`${what} has invalid urls`);
  }
  if (artifactType !== undefined && typeof artifactType !== 'string')
    throw invalid(`${what} has an invalid artifactType`);
  const annotations = checkStringMap(v.annotations, `${what} annotations`);
  const d: Descriptor = { mediaType, digest, size };
  if (urls) d.urls = urls as string[];
  if (annotations) d.annotations = annotations;
  if (typeof artifactType === 'string') d.artifactType = artifactType;
  if (isObject(v.platform)) d.platform = v.platform;
  return d;
}

function parseJson(content: Buffer): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(content.toString('utf8'));
  } catch (err) {
    throw invalid(`manifest is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(doc)) throw invalid('manifest is not a JSON object');
  return doc;
}

/** Guess the media type of a document from its fields, as the reference registry does on read. */
function sniff(doc: Record<string, unknown>): string | undefined {
  if (doc.schemaVersion === 1) return MediaTypes.dockerSchema1Signed;
  if (typeof doc.mediaType === 'string' && V2_TYPES.has(doc.mediaType)) return doc.mediaType;
  if (doc.schemaVersion === 2 && doc.mediaType === undefined) {
    if (Array.isArray(doc.manifests)) return MediaTypes.ociIndex;
    if (doc.config !== undefined) return MediaTypes.ociManifest;
  }
  return undefined;
}

function layerIsForeign(d: Descriptor): boolean {
  return (
    (d.urls?.length ?? 0) > 0 &&
    (d.mediaType === MediaTypes.dockerForeignLayer || d.mediaType.includes('.nondistributable.'))
  );
}

function describeV2(
  doc: Record<string, unknown>,
  mediaType: string,
  content: Buffer,
  digest: string,
): ManifestInfo {
  if (doc.schemaVersion !== 2) throw invalid(`schemaVersion must be 2 for ${mediaType}`);
  const info: ManifestInfo = { digest, mediaType, content, blobs: [], manifests: [] };
  const annotations = checkStringMap(doc.annotations, 'annotations');
  if (annotations) info.annotations = annotations;
  if (doc.subject !== undefined) info.subject = checkDescriptor(doc.subject, 'subject');
  if (doc.artifactType !== undefined) {
    if (typeof doc.artifactType !== 'string') throw invalid('artifactType must be a string');
    info.artifactType = doc.artifactType;
  }
  if (mediaType === MediaTypes.dockerSchema2 || mediaType === MediaTypes.ociManifest) {
    const config = checkDescriptor(doc.config, 'config');
    if (!Array.isArray(doc.layers)) throw invalid('layers must be an array');
    if (mediaType === MediaTypes.dockerSchema2 && doc.layers.length === 0)
      throw invalid('layers must not be empty');
    const layers = doc.layers.map((l, i) => checkDescriptor(l, `layers[${i}]`));
    info.blobs.push(config.digest);
    for (const layer of layers) if (!layerIsForeign(layer)) info.blobs.push(layer.digest);
    if (info.artifactType === undefined && mediaType === MediaTypes.ociManifest) {
      info.artifactType = config.mediaType;
    }
  } else {
    if (!Array.isArray(doc.manifests)) throw invalid('manifests must be an array');
    const children = doc.manifests.map((m, i) => checkDescriptor(m, `manifests[${i}]`));
    for (const child of children) info.manifests.push(child.digest);
  }
  info.blobs = [...new Set(info.blobs)];
  info.manifests = [...new Set(info.manifests)];
  return info;
}

function describeSchema1Payload(payload: Buffer, content: Buffer, digest: string): ManifestInfo {
  const doc = parseJson(payload);
  if (doc.schemaVersion !== 1) throw invalid('schemaVersion must be 1');
  if (typeof doc.name !== 'string' || typeof doc.tag !== 'string')
    throw invalid('name and tag must be strings');
  if (!Array.isArray(doc.fsLayers) || doc.fsLayers.length === 0)
    throw invalid('fsLayers must be a non-empty array');
  if (!Array.isArray(doc.history) || doc.history.length !== doc.fsLayers.length) {
    throw invalid('history must have as many entries as fsLayers');
  }
  const blobs: string[] = [];
  doc.fsLayers.forEach((l, i) => {
    const sum = isObject(l) ? l.blobSum : undefined;
    if (typeof sum !== 'string' || !tryParseDigest(sum))
      throw invalid(`fsLayers[${i}].blobSum is not a valid digest`);
    blobs.push(sum);
  });
  return {
    digest,
    mediaType: MediaTypes.dockerSchema1Signed,
    content,
    blobs: [...new Set(blobs)],
    manifests: [],
    schema1: { name: doc.name, tag: doc.tag },
  };
}

/** Payload of a signed schema-1 document, verifying its signatures; MANIFEST_UNVERIFIED / INVALID. */
function schema1Payload(content: Buffer): Buffer {
  try {
    return verifySchema1(content);
  } catch (err) {
    if (err instanceof Schema1Error) {
      throw new RegistryError(
        err.reason === 'unverified' ? 'MANIFEST_UNVERIFIED' : 'MANIFEST_INVALID',
        err.message,
      );
    }
    throw err;
  }
}

/**
 * Parse and validate a manifest being pushed. `contentType` is the request's Content-Type; when
 * it is absent or generic the type comes from the document itself.
 */
export function parseManifest(contentType: string | undefined, content: Buffer): ManifestInfo {
  const doc = parseJson(content);
  const declared = bareMediaType(contentType);
  let mediaType: string | undefined;
  if (V2_TYPES.has(declared)) mediaType = declared;
  else if (declared === MediaTypes.dockerSchema1 || declared === MediaTypes.dockerSchema1Signed) {
    mediaType = MediaTypes.dockerSchema1Signed;
  } else mediaType = sniff(doc);
  if (!mediaType) {
    throw invalid(`unsupported manifest media type ${JSON.stringify(declared || doc.mediaType || '')}`);
  }
  if (mediaType === MediaTypes.dockerSchema1Signed) {
    const payload = schema1Payload(content);
    return describeSchema1Payload(payload, content, sha256Digest(payload));
  }
  if (doc.mediaType !== undefined && doc.mediaType !== mediaType) {
    throw invalid(
      `manifest mediaType ${JSON.stringify(doc.mediaType)} does not match the Content-Type ${JSON.stringify(mediaType)}`,
    );
  }
  if (
    doc.mediaType === undefined &&
    (mediaType === MediaTypes.dockerSchema2 || mediaType === MediaTypes.dockerManifestList)
  ) {
    throw invalid(`mediaType field is required for ${mediaType}`);
  }
  return describeV2(doc, mediaType, content, sha256Digest(content));
}

/**
 * Describe a manifest read from storage (already validated when it was pushed, possibly by
 * another registry). `digest` is the digest it is stored under. Schema-1 signatures are not
 * re-verified.
 */
export function describeStored(content: Buffer, digest: string): ManifestInfo {
  const doc = parseJson(content);
  const mediaType = sniff(doc) ?? (typeof doc.mediaType === 'string' ? doc.mediaType : undefined);
  if (!mediaType) throw invalid('stored manifest has an unknown media type');
  if (mediaType === MediaTypes.dockerSchema1Signed) {
    let payload = content;
    if (Array.isArray(doc.signatures)) {
      try {
        payload = verifySchema1(content);
      } catch {
        payload = content;
      }
    }
    const info = describeSchema1Payload(payload, content, digest);
    if (!Array.isArray(doc.signatures)) info.mediaType = MediaTypes.dockerSchema1;
    return info;
  }
  return describeV2(doc, mediaType, content, digest);
}

/** The JSON payload of a schema-1 document, parsed (for tests and tooling). */
export function isSchema1(mediaType: string): boolean {
  return SCHEMA1_TYPES.has(mediaType) || mediaType === MediaTypes.dockerSchema1Signed;
}
