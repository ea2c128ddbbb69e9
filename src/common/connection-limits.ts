/**
 * Caps on what one connection may hold of a server, for any HTTP server (the engine's and the
 * registry's; enforced by src/http/connection-limits.ts). Each is answered with a 4xx and a
 * closed connection, never by the process: headers past `maxHeaderBytes` 431, headers not
 * complete within `headersTimeoutMs` 408, a client past its share of connections 429, a request
 * body that stops arriving for `bodyIdleTimeoutMs` 408 (or a closed connection once the answer is
 * under way). A value of 0 turns a cap off.
 */
export interface ConnectionLimits {
  /** Most bytes of request line and headers of one request (431 past it). */
  maxHeaderBytes: number;
  /** Most open connections from one client address on a TCP listener (429 past it). */
  maxConnectionsPerClient: number;
  /**
   * Most open connections on a unix socket listener, all local clients together (429 past it):
   * a unix socket's peers have no address to tell them apart.
   */
  maxLocalConnections: number;
  /** Time from a connection's (or request's) first byte to its complete headers (408 past it). */
  headersTimeoutMs: number;
  /**
   * A request body that receives no byte for this long while the server waits for it. Only a
   * client that stops sending what it started is cut: answers that stream for hours (logs,
   * events, attach) and bodies the server reads slowly are not affected.
   */
  bodyIdleTimeoutMs: number;
  /** An idle keep-alive connection (between requests) is closed after this long. */
  keepAliveTimeoutMs: number;
}
