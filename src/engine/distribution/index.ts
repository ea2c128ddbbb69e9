/**
 * The engine's Registry V2 client (below images: it imports only src/common and node).
 *
 * - endpoint.ts        which endpoints a registry domain has: mirrors for docker.io, https or
 *                      plain http (loopback, --insecure-registry hosts and CIDRs)
 * - certs.ts           certs.d/<host:port>/ (ca.crt, client *.cert + *.key) as dockerd reads them
 * - transport.ts       HTTP(S) with keep-alive agents per endpoint, redirects
 * - raw-get.ts         a large blob read off a plain-HTTP socket into one reused buffer
 * - challenge.ts       WWW-Authenticate parsing
 * - auth.ts            Basic and Bearer (token server, refresh tokens), the token cache
 * - auth-config.ts     X-Registry-Auth decoding
 * - client.ts          RegistryClient (endpoints, /v2/ version check, open) and
 *                      RepositorySession (manifests, tags, blobs with Range resume)
 * - manifest.ts        parsing and digest checks, platform choice in an index, schema 1
 * - registry-error.ts  registry error bodies as typed errors
 */
export { Authorizer, repositoryScope, TokenCache } from './auth.js';
export { decodeAuthHeader, hasCredentials } from './auth-config.js';
export { DEFAULT_CERTS_DIRS, type RegistryTls, readCertsDirs } from './certs.js';
export { type Challenge, parseChallenges } from './challenge.js';
export {
  type BlobReadOptions,
  type BlobSink,
  RegistryClient,
  type RegistryClientOptions,
  RepositorySession,
  type RepositoryTarget,
} from './client.js';
export { type Endpoint, EndpointResolver, HUB_DOMAIN, noMirrorMessage, splitHost } from './endpoint.js';
export {
  choosePlatform,
  parseManifest,
  type Schema1Layer,
  schema1Config,
  schema1Layers,
  schema1Payload,
} from './manifest.js';
export { isIndexType, isSchema1Type, MANIFEST_ACCEPT, MediaTypes } from './media-types.js';
export {
  describeRegistryError,
  errorFromResponse,
  type RegistryErrorDetail,
  type RegistryErrorEntry,
  registryDetail,
  registryError,
} from './registry-error.js';
export { type HttpRequest, NetworkError, readBody, Transport } from './transport.js';
export type * from './types.js';
