/** Manifest media types the registry stores and serves. */
export const MediaTypes = {
  dockerSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
  dockerSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  dockerSchema2: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  dockerForeignLayer: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
  ociEmpty: 'application/vnd.oci.empty.v1+json',
} as const;

export const MANIFEST_MEDIA_TYPES: readonly string[] = [
  MediaTypes.dockerSchema1,
  MediaTypes.dockerSchema1Signed,
  MediaTypes.dockerSchema2,
  MediaTypes.dockerManifestList,
  MediaTypes.ociManifest,
  MediaTypes.ociIndex,
];

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  urls?: string[];
  annotations?: Record<string, string>;
  artifactType?: string;
  platform?: Record<string, unknown>;
}

/** What the registry needs to know about a stored manifest. */
export interface ManifestInfo {
  /** The canonical digest: of the bytes, or of the JWS payload for signed schema 1. */
  digest: string;
  mediaType: string;
  /** The bytes served on GET. */
  content: Buffer;
  /** Blobs it references (config and layers), excluding foreign / non-distributable layers. */
  blobs: string[];
  /** Manifests it references (an index's children). */
  manifests: string[];
  subject?: Descriptor;
  artifactType?: string;
  annotations?: Record<string, string>;
  /** Schema 1 only: name and tag from the payload. */
  schema1?: { name: string; tag: string };
}
