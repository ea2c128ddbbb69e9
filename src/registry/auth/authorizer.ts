import type { IncomingMessage } from 'node:http';

/**
 * What a request wants to do, in the token scope grammar: `repository:<name>:pull,push`,
 * `registry:catalog:*`.
 */
export interface Access {
  type: 'repository' | 'registry';
  name: string;
  actions: string[];
}

export interface Grant {
  /** The authenticated user, when there is one (access log, token subject). */
  user?: string;
  /**
   * Whether the same credentials may also pull from another repository (what a mount without
   * `from` may search). Absent: only the repositories the request named.
   */
  mayPull?: (name: string) => boolean;
}

/**
 * Decides whether a request may do what it wants. Throws an Unauthorized BerthError (detail
 * `{ challenge: string }` holds the WWW-Authenticate value) when credentials are missing or wrong,
 * and a Forbidden one (registry code DENIED) when they are valid but do not cover the access.
 */
export interface Authorizer {
  authorize(req: IncomingMessage, access: Access[]): Promise<Grant>;
  /**
   * The user a request's credentials were recently verified for, answered synchronously and
   * cheaply (no bcrypt, no signature check), or undefined. The rate limiter keys clients by it.
   */
  identify?(req: IncomingMessage): string | undefined;
}

/** The authorizer of a registry configured without auth: every request is allowed. */
export const openAccess: Authorizer = {
  authorize: async () => ({ mayPull: () => true }),
};

export function formatScope(access: Access): string {
  return `${access.type}:${access.name}:${access.actions.join(',')}`;
}
