import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Params, Router } from '../../http/router.js';
import { versionAtLeast } from './versions.js';

/** What an engine API handler gets for one request. */
export interface ApiContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** Present when the client sent `Upgrade: tcp` (attach, exec start): the socket to hijack. */
  upgrade?: { socket: Duplex; head: Buffer };
  params: Params;
  query: URLSearchParams;
  /** The negotiated API version: the URL prefix, or the maximum when there is none. */
  version: string;
  /**
   * Take the raw connection over (attach, exec start): the upgraded socket, or a plain request's
   * socket taken from the HTTP server, positioned after the request (its body read and dropped,
   * what came after it put back). It comes paused: attach listeners, then resume it.
   */
  takeOver(): Promise<Duplex>;
  /**
   * The request's JSON object body ({} when empty), for routes that may be upgraded (exec start):
   * an upgrade request's body arrives on the socket, not in `req`.
   */
  readJsonObject(limit?: number): Promise<Record<string, unknown>>;
}

export type ApiHandler = (ctx: ApiContext) => Promise<void> | void;
export type ApiRouter = Router<ApiHandler>;

export function atLeast(ctx: ApiContext, version: string): boolean {
  return versionAtLeast(ctx.version, version);
}
