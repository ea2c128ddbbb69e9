/** Manifest and layer media types a registry may answer with. */
export const MediaTypes = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  schema1: 'application/vnd.docker.distribution.manifest.v1+json',
  schema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  dockerLayer: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  dockerForeignLayer: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
} as const;

/** The Accept list of a manifest GET, in dockerd's order of preference. */
export const MANIFEST_ACCEPT = [
  MediaTypes.dockerManifest,
  MediaTypes.dockerList,
  MediaTypes.ociManifest,
  MediaTypes.ociIndex,
  MediaTypes.schema1Signed,
  MediaTypes.schema1,
];

export function isIndexType(mediaType: string): boolean {
  return mediaType === MediaTypes.dockerList || mediaType === MediaTypes.ociIndex;
}

export function isSchema1Type(mediaType: string): boolean {
  return mediaType === MediaTypes.schema1 || mediaType === MediaTypes.schema1Signed;
}
