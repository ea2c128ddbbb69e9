import { type ImageConfigFile, MediaTypes } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { parseNormalizedNamed, type Reference, tryParseNormalizedNamed } from '../../../common/reference.js';
import { hostArchitecture } from '../config.js';
import { formatPlatform, type OciPlatform, platformMatches } from '../platform.js';
import type { ArchiveFile, ImageArchive } from './reader.js';

/**
 * What an image archive says, read and checked before anything is stored: for each image, its
 * config (exact bytes), its layer files in order, its tags. Two forms: docker save's
 * (`manifest.json`, as dockerd 20.10 and later write it, layers anywhere the manifest says) and a
 * plain OCI image layout (`oci-layout`, `index.json`, `blobs/`; skopeo's `oci-archive:`).
 */
export interface LoadItem {
  config: ImageConfigFile;
  configBytes: Buffer;
  /** The layer files, bottom first, with the diff ID each must have once uncompressed. */
  layers: Array<{ file: ArchiveFile; diffId: string; name: string }>;
  tags: Reference[];
  /** The parent image ID docker save recorded, if any. */
  parent?: string;
}

/** One entry of docker save's manifest.json (moby's tarexport.manifestItem). */
export interface ManifestItem {
  Config: string;
  RepoTags: string[] | null;
  Layers: string[];
  Parent?: string;
  LayerSources?: Record<string, unknown>;
}

/** An OCI descriptor as index.json and manifests hold them. */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: OciPlatform;
}

export interface OciManifest {
  schemaVersion: number;
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
}

export interface OciIndex {
  schemaVersion: number;
  mediaType?: string;
  manifests: Descriptor[];
}

/** containerd's annotation with an image's full name. */
export const ANNOTATION_IMAGE_NAME = 'io.containerd.image.name';
/** OCI's reference name annotation (a tag, or a full reference as skopeo writes it). */
export const ANNOTATION_REF_NAME = 'org.opencontainers.image.ref.name';

function refuse(message: string) {
  return invalidParameter(`invalid image archive: ${message}`);
}

const SHA256 = /^sha256:[a-f0-9]{64}$/;

/** A `blobs/sha256/<hex>` path whose content is not that digest is refused. */
function checkBlobPath(archive: ImageArchive, name: string, f: ArchiveFile): void {
  const m = /^blobs\/sha256\/([a-f0-9]{64})$/.exec(archive.resolve(name));
  if (m && f.digest !== `sha256:${m[1]}`)
    throw refuse(`${name} does not hold what its name says (its digest is ${f.digest})`);
}

/** The image config: JSON with rootfs.diff_ids, for Linux. */
function checkConfig(value: unknown, name: string): ImageConfigFile {
  const config = value as ImageConfigFile;
  if (!config || typeof config !== 'object' || Array.isArray(config))
    throw refuse(`${name} is not an image config`);
  const diffIds = config.rootfs?.diff_ids;
  if (!Array.isArray(diffIds) || diffIds.some((d) => typeof d !== 'string' || !SHA256.test(d)))
    throw refuse(`${name} has no valid rootfs.diff_ids`);
  const os = config.os || 'linux';
  if (os !== 'linux') throw invalidParameter(`cannot load ${os} image on linux`);
  return config;
}

function parseTag(text: unknown): Reference {
  if (typeof text !== 'string') throw invalidParameter(`invalid tag ${JSON.stringify(text)}`);
  const ref = parseNormalizedNamed(text);
  if (ref.tag === undefined || ref.digest !== undefined) throw invalidParameter(`invalid tag "${text}"`);
  return ref;
}

/** docker save's form: manifest.json. */
export async function dockerItems(archive: ImageArchive): Promise<LoadItem[]> {
  const { value } = await archive.readJson<ManifestItem[] | null>('manifest.json', 'the archive');
  if (value === null) return [];
  if (!Array.isArray(value)) throw refuse('manifest.json is not a list of images');
  const items: LoadItem[] = [];
  for (const m of value) {
    if (!m || typeof m !== 'object' || typeof m.Config !== 'string' || !Array.isArray(m.Layers))
      throw refuse('manifest.json has an entry without Config or Layers');
    const configFile = archive.need(m.Config, 'manifest.json');
    checkBlobPath(archive, m.Config, configFile);
    const configBytes = await archive.read(configFile, m.Config);
    let parsed: unknown;
    try {
      parsed = JSON.parse(configBytes.toString('utf8'));
    } catch {
      throw refuse(`${m.Config} is not JSON`);
    }
    const config = checkConfig(parsed, m.Config);
    const diffIds = config.rootfs.diff_ids;
    if (m.Layers.length !== diffIds.length)
      throw invalidParameter(
        `invalid manifest, layers length mismatch: expected ${m.Layers.length}, got ${diffIds.length}`,
      );
    const layers = m.Layers.map((name, i) => {
      if (typeof name !== 'string') throw refuse('manifest.json has a layer that is not a path');
      const file = archive.need(name, 'manifest.json');
      checkBlobPath(archive, name, file);
      return { file, diffId: diffIds[i] as string, name };
    });
    const item: LoadItem = { config, configBytes, layers, tags: (m.RepoTags ?? []).map(parseTag) };
    if (typeof m.Parent === 'string' && SHA256.test(m.Parent)) item.parent = m.Parent;
    items.push(item);
  }
  return items;
}

/** A blob of the OCI layout, checked against its descriptor (digest and size). */
function blob(archive: ImageArchive, d: Descriptor, by: string): ArchiveFile {
  if (!d || typeof d.digest !== 'string' || !SHA256.test(d.digest))
    throw refuse(`${by} has a descriptor without a sha256 digest`);
  const name = `blobs/sha256/${d.digest.slice(7)}`;
  const f = archive.need(name, by);
  if (f.digest !== d.digest)
    throw refuse(`${name} does not hold what its name says (its digest is ${f.digest})`);
  if (typeof d.size === 'number' && d.size !== f.size)
    throw refuse(`${name} is ${f.size} bytes, its descriptor says ${d.size}`);
  return f;
}

async function blobJson<T>(
  archive: ImageArchive,
  d: Descriptor,
  by: string,
): Promise<{ value: T; bytes: Buffer }> {
  const f = blob(archive, d, by);
  const bytes = await archive.read(f, d.digest);
  try {
    return { value: JSON.parse(bytes.toString('utf8')) as T, bytes };
  } catch {
    throw refuse(`blob ${d.digest} is not JSON`);
  }
}

const MANIFESTS = new Set<string>([MediaTypes.ociManifest, MediaTypes.dockerManifest]);
const INDEXES = new Set<string>([MediaTypes.ociIndex, MediaTypes.dockerManifestList]);

/**
 * The name an index.json entry gives its image: containerd's full-name annotation, else OCI's
 * ref.name when it is a whole reference with a tag (skopeo's `oci-archive:x:busybox:1`); a bare
 * tag (`latest`) names no repository, and the image is loaded by ID.
 */
export function ociTag(annotations: Record<string, string> | undefined): Reference | undefined {
  const full = annotations?.[ANNOTATION_IMAGE_NAME];
  const refName = annotations?.[ANNOTATION_REF_NAME];
  for (const text of [full, refName]) {
    if (!text || (text === refName && !/[:/]/.test(text))) continue;
    const ref = tryParseNormalizedNamed(text);
    if (ref?.tag !== undefined && ref.digest === undefined) return ref;
  }
  return undefined;
}

/** The host's platform, the one an index's manifests are chosen for. */
function hostPlatform(): OciPlatform {
  return { os: 'linux', architecture: hostArchitecture() };
}

/** The image manifest a descriptor of index.json leads to (an index: this platform's). */
async function resolveManifest(
  archive: ImageArchive,
  d: Descriptor,
  want: OciPlatform,
  depth = 0,
): Promise<{ manifest: OciManifest; digest: string }> {
  if (depth > 4) throw refuse('indexes nested too deep');
  if (INDEXES.has(d.mediaType)) {
    const { value: index } = await blobJson<OciIndex>(archive, d, 'index.json');
    const match = (index.manifests ?? []).find(
      (m) => MANIFESTS.has(m.mediaType) && (!m.platform || platformMatches(want, m.platform)),
    );
    if (!match) throw invalidParameter(`no image for ${formatPlatform(want)} in index ${d.digest}`);
    return resolveManifest(archive, match, want, depth + 1);
  }
  if (!MANIFESTS.has(d.mediaType)) throw refuse(`unsupported media type ${JSON.stringify(d.mediaType)}`);
  const { value } = await blobJson<OciManifest>(archive, d, 'index.json');
  if (!value?.config || !Array.isArray(value.layers))
    throw refuse(`manifest ${d.digest} has no config or layers`);
  return { manifest: value, digest: d.digest };
}

/** A plain OCI image layout: index.json (and oci-layout); indexes in it give `want`'s manifest (default: this host's). */
export async function ociItems(
  archive: ImageArchive,
  want: OciPlatform = hostPlatform(),
): Promise<LoadItem[]> {
  const { value: layout } = await archive.readJson<{ imageLayoutVersion?: string }>(
    'oci-layout',
    'the archive',
  );
  if (!layout?.imageLayoutVersion) throw refuse('oci-layout has no imageLayoutVersion');
  const { value: index } = await archive.readJson<OciIndex>('index.json', 'the archive');
  if (!index || !Array.isArray(index.manifests)) throw refuse('index.json has no manifests');
  const byManifest = new Map<string, LoadItem>();
  for (const d of index.manifests) {
    const { manifest, digest } = await resolveManifest(archive, d, want);
    let item = byManifest.get(digest);
    if (!item) {
      const configFile = blob(archive, manifest.config, `manifest ${digest}`);
      const configBytes = await archive.read(configFile, manifest.config.digest);
      let parsed: unknown;
      try {
        parsed = JSON.parse(configBytes.toString('utf8'));
      } catch {
        throw refuse(`config ${manifest.config.digest} is not JSON`);
      }
      const config = checkConfig(parsed, `config ${manifest.config.digest}`);
      const diffIds = config.rootfs.diff_ids;
      if (manifest.layers.length !== diffIds.length)
        throw invalidParameter(
          `invalid manifest, layers length mismatch: expected ${manifest.layers.length}, got ${diffIds.length}`,
        );
      const layers = manifest.layers.map((l, i) => ({
        file: blob(archive, l, `manifest ${digest}`),
        diffId: diffIds[i] as string,
        name: l.digest,
      }));
      item = { config, configBytes, layers, tags: [] };
      byManifest.set(digest, item);
    }
    const tag = ociTag(d.annotations);
    if (tag) item.tags.push(tag);
  }
  return [...byManifest.values()];
}

/** The images an archive holds, in either form (docker save's manifest.json first). */
export async function loadItems(archive: ImageArchive, platform?: OciPlatform): Promise<LoadItem[]> {
  if (archive.file('manifest.json')) return dockerItems(archive);
  if (archive.file('index.json')) return ociItems(archive, platform);
  throw invalidParameter(
    'invalid image archive: no manifest.json (docker save) or index.json (OCI image layout) in it',
  );
}
