import type { ParsedDigest } from '../../common/digest.js';

/**
 * Storage paths, in the reference registry's layout (distribution's registry/storage/paths.go):
 *
 *   /docker/registry/v2/blobs/<alg>/<hex[0:2]>/<hex>/data
 *   /docker/registry/v2/repositories/<name>/_layers/<alg>/<hex>/link
 *   /docker/registry/v2/repositories/<name>/_manifests/revisions/<alg>/<hex>/link
 *   /docker/registry/v2/repositories/<name>/_manifests/tags/<tag>/current/link
 *   /docker/registry/v2/repositories/<name>/_manifests/tags/<tag>/index/<alg>/<hex>/link
 *   /docker/registry/v2/repositories/<name>/_uploads/<uuid>/{data,startedat,hashstates/<alg>/<offset>}
 *
 * berth extensions, ignored by the reference registry:
 *   .../_manifests/revisions/<alg>/<hex>/signatures/<alg>/<hex>/link  the signed bytes of a schema-1 manifest
 *   .../_manifests/referrers/<alg>/<subject hex>/<alg>/<hex>/link     manifests whose subject is the digest
 */
export const ROOT = '/docker/registry/v2';
export const BLOBS = `${ROOT}/blobs`;
export const REPOSITORIES = `${ROOT}/repositories`;

type D = Pick<ParsedDigest, 'algorithm' | 'hex'>;

export const paths = {
  blobDir: (d: D) => `${BLOBS}/${d.algorithm}/${d.hex.slice(0, 2)}/${d.hex}`,
  blobData: (d: D) => `${BLOBS}/${d.algorithm}/${d.hex.slice(0, 2)}/${d.hex}/data`,
  repo: (name: string) => `${REPOSITORIES}/${name}`,
  layersDir: (name: string) => `${REPOSITORIES}/${name}/_layers`,
  layerLink: (name: string, d: D) => `${REPOSITORIES}/${name}/_layers/${d.algorithm}/${d.hex}/link`,
  layerDir: (name: string, d: D) => `${REPOSITORIES}/${name}/_layers/${d.algorithm}/${d.hex}`,
  manifestsDir: (name: string) => `${REPOSITORIES}/${name}/_manifests`,
  revisionsDir: (name: string) => `${REPOSITORIES}/${name}/_manifests/revisions`,
  revisionDir: (name: string, d: D) => `${REPOSITORIES}/${name}/_manifests/revisions/${d.algorithm}/${d.hex}`,
  revisionLink: (name: string, d: D) =>
    `${REPOSITORIES}/${name}/_manifests/revisions/${d.algorithm}/${d.hex}/link`,
  signatureLink: (name: string, d: D, sig: D) =>
    `${REPOSITORIES}/${name}/_manifests/revisions/${d.algorithm}/${d.hex}/signatures/${sig.algorithm}/${sig.hex}/link`,
  signaturesDir: (name: string, d: D) =>
    `${REPOSITORIES}/${name}/_manifests/revisions/${d.algorithm}/${d.hex}/signatures`,
  tagsDir: (name: string) => `${REPOSITORIES}/${name}/_manifests/tags`,
  tagDir: (name: string, tag: string) => `${REPOSITORIES}/${name}/_manifests/tags/${tag}`,
  tagCurrentLink: (name: string, tag: string) =>
    `${REPOSITORIES}/${name}/_manifests/tags/${tag}/current/link`,
  tagIndexLink: (name: string, tag: string, d: D) =>
    `${REPOSITORIES}/${name}/_manifests/tags/${tag}/index/${d.algorithm}/${d.hex}/link`,
  referrersDir: (name: string, subject: D) =>
    `${REPOSITORIES}/${name}/_manifests/referrers/${subject.algorithm}/${subject.hex}`,
  referrerLink: (name: string, subject: D, d: D) =>
    `${REPOSITORIES}/${name}/_manifests/referrers/${subject.algorithm}/${subject.hex}/${d.algorithm}/${d.hex}/link`,
  uploadsDir: (name: string) => `${REPOSITORIES}/${name}/_uploads`,
  uploadDir: (name: string, id: string) => `${REPOSITORIES}/${name}/_uploads/${id}`,
  uploadData: (name: string, id: string) => `${REPOSITORIES}/${name}/_uploads/${id}/data`,
  uploadStartedAt: (name: string, id: string) => `${REPOSITORIES}/${name}/_uploads/${id}/startedat`,
  uploadHashStates: (name: string, id: string) => `${REPOSITORIES}/${name}/_uploads/${id}/hashstates`,
};
