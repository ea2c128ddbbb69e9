/** Typed data of the Registry V2 protocol as the engine's client reads it. */

/** The platform an index entry names (image-spec Platform). */
export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
  'os.version'?: string;
  'os.features'?: string[];
}

/** A content descriptor (image-spec Descriptor). */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  urls?: string[];
  annotations?: Record<string, string>;
  platform?: Platform;
}

/** Docker schema 2 / OCI image manifest. */
export interface ImageManifest {
  schemaVersion: 2;
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
  annotations?: Record<string, string>;
}

/** Docker manifest list / OCI image index. */
export interface ImageIndex {
  schemaVersion: 2;
  mediaType?: string;
  manifests: Descriptor[];
  annotations?: Record<string, string>;
}

/** Docker image manifest schema 1 (signed or not). */
export interface Schema1Manifest {
  schemaVersion: 1;
  name: string;
  tag: string;
  architecture: string;
  fsLayers: Array<{ blobSum: string }>;
  history: Array<{ v1Compatibility: string }>;
  signatures?: unknown[];
}

/** A manifest as fetched: its bytes, their digest, its media type, and the parsed form. */
export type FetchedManifest = {
  /** sha256 of `bytes` (for a signed schema 1: of the payload without signatures). */
  digest: string;
  mediaType: string;
  bytes: Buffer;
} & (
  | { kind: 'manifest'; manifest: ImageManifest }
  | { kind: 'index'; index: ImageIndex }
  | { kind: 'schema1'; schema1: Schema1Manifest }
);

/**
 * Credentials as the docker CLI sends them in `X-Registry-Auth` (base64url JSON of moby's
 * registry.AuthConfig).
 */
export interface AuthConfig {
  username?: string;
  password?: string;
  /** base64 of `username:password`. */
  auth?: string;
  email?: string;
  serveraddress?: string;
  /** An OAuth2 refresh token from an earlier login. */
  identitytoken?: string;
  /** A bearer token to send as it is. */
  registrytoken?: string;
}
