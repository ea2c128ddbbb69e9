import type { ExtraRoute, RateLimiter } from './app.js';
import type { Authorizer } from './auth/authorizer.js';
import { configFromObject, type RegistryConfig } from './config.js';
import { type RegistryHooks, type RunningRegistry, serveRegistry } from './server.js';

export type { ExtraRoute, RateLimiter, RegistryAppOptions } from './app.js';
export { createRegistryApp } from './app.js';
export type { RegistryConfig } from './config.js';
export { configFromObject, defaultConfig, loadConfig, parseConfig } from './config.js';
export type { RegistryHooks, RunningRegistry } from './server.js';
export { serveRegistry } from './server.js';

/**
 * Start a registry from a configuration (typed, or a raw config.yml-shaped object). Auth, the
 * token server and rate limiting come from the configuration (auth.*, berth.tokenserver,
 * berth.ratelimit) unless `hooks` supplies them.
 */
export async function startRegistry(
  config: RegistryConfig | Record<string, unknown>,
  hooks: RegistryHooks = {},
): Promise<{ url: string; close(): Promise<void>; running: RunningRegistry }> {
  const typed = isTyped(config) ? config : configFromObject(config);
  // The auth and rate-limiting code is loaded only when the configuration asks for it.
  const access: { authorizer?: Authorizer; rateLimiter?: RateLimiter; extraRoutes: ExtraRoute[] } =
    needsAccessControl(typed)
      ? (await import('./auth/from-config.js')).accessControlFromConfig(typed)
      : { authorizer: undefined, rateLimiter: undefined, extraRoutes: [] };
  const running = await serveRegistry(typed, {
    ...hooks,
    authorizer: hooks.authorizer ?? access.authorizer,
    rateLimiter: hooks.rateLimiter ?? access.rateLimiter,
    extraRoutes: [...(hooks.extraRoutes ?? []), ...access.extraRoutes],
  });
  return { url: running.url, close: () => running.close(), running };
}

function needsAccessControl(c: RegistryConfig): boolean {
  return (
    Object.keys(c.auth).length > 0 || c.berth.tokenserver !== undefined || c.berth.ratelimit !== undefined
  );
}

function isTyped(c: RegistryConfig | Record<string, unknown>): c is RegistryConfig {
  return typeof c === 'object' && c !== null && 'raw' in c && 'berth' in c && 'storage' in c;
}
