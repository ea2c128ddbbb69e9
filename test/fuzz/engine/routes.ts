import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ApiHandler } from '../../../src/engine/api/context.js';
import { Router } from '../../../src/http/router.js';

/**
 * The engine's routes, read from its route tables: every `register*Routes` function of
 * src/engine/api/*.routes.ts is called with a router that records what it adds (the backends are
 * not touched while routes are registered). A routes file added later is fuzzed without a change
 * here. The query parameters a file reads are read from its source.
 */

export interface EngineRoute {
  method: string;
  template: string;
  /** The routes file (`containers.routes.ts`). */
  file: string;
  /** The handler's source: whether it reads a body. */
  handlerText: string;
  /** Query parameters the routes file reads. */
  params: string[];
}

const apiDir = resolve(import.meta.dirname, '../../../src/engine/api');

class RecordingRouter extends Router<ApiHandler> {
  readonly seen: Array<{ method: string; template: string; handler: ApiHandler }> = [];
  override add(method: string | string[], template: string, handler: ApiHandler): this {
    for (const m of Array.isArray(method) ? method : [method])
      this.seen.push({ method: m.toUpperCase(), template, handler });
    return this;
  }
}

/** The query parameter names a routes file reads (`query.get('x')`, `bool(ctx, 'x')`...). */
export function queryParamsOf(source: string): string[] {
  const names = new Set<string>();
  const patterns = [
    /\.(?:get|getAll|has)\(\s*'([^']+)'\s*\)/g,
    /\bbool\(\s*ctx,\s*'([^']+)'/g,
    /\b\w+Param\(\s*[\w.]+,\s*'([^']+)'/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) names.add(m[1] as string);
  return [...names].sort();
}

export async function engineRoutes(): Promise<EngineRoute[]> {
  const out: EngineRoute[] = [];
  const files = readdirSync(apiDir)
    .filter((f) => f.endsWith('.routes.ts'))
    .sort();
  for (const file of files) {
    const full = join(apiDir, file);
    const params = queryParamsOf(readFileSync(full, 'utf8'));
    const mod = (await import(pathToFileURL(full).href)) as Record<string, unknown>;
    for (const [name, fn] of Object.entries(mod)) {
      if (!/^register\w*Routes$/.test(name) || typeof fn !== 'function') continue;
      const router = new RecordingRouter();
      (fn as (router: unknown, backend: unknown, flag: unknown) => void)(router, {}, false);
      for (const r of router.seen)
        out.push({ method: r.method, template: r.template, file, handlerText: String(r.handler), params });
    }
  }
  if (out.length === 0) throw new Error(`no routes found in ${apiDir}`);
  return out;
}

/** Does a handler read the request body (JSON or a stream)? */
export function readsBody(route: EngineRoute): boolean {
  return /readJsonObject|readBody|readCreateBody|readJson\(|ctx\.req as AsyncIterable|ctx\.req,/.test(
    route.handlerText,
  );
}
