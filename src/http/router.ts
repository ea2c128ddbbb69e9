/**
 * A regex route table. Path templates use `{name}` for one segment and `{name*}` for a value that
 * may contain '/' (image and repository names). Routes are tried in the order they were added.
 */
export type Params = Record<string, string>;

export interface RouteMatch<H> {
  handler: H;
  params: Params;
}

interface Route<H> {
  method: string;
  regex: RegExp;
  keys: string[];
  handler: H;
}

/** The first path segment of a template or path when it is literal (`/containers/...` -> `containers`). */
function firstSegment(path: string): string {
  const end = path.indexOf('/', 1);
  return end < 0 ? path.slice(1) : path.slice(1, end);
}

export function compileTemplate(template: string): { regex: RegExp; keys: string[] } {
  const keys: string[] = [];
  let source = '';
  let rest = template;
  for (;;) {
    const open = rest.indexOf('{');
    if (open < 0) {
      source += escapeRegex(rest);
      break;
    }
    const close = rest.indexOf('}', open);
    if (close < 0) throw new Error(`unbalanced route template ${template}`);
    source += escapeRegex(rest.slice(0, open));
    let key = rest.slice(open + 1, close);
    if (key.endsWith('*')) {
      key = key.slice(0, -1);
      source += '(.+?)';
    } else {
      source += '([^/]+)';
    }
    keys.push(key);
    rest = rest.slice(close + 1);
  }
  return { regex: new RegExp(`^${source}$`), keys };
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class Router<H> {
  /**
   * Routes by their literal first segment, in the order added; routes whose first segment is a
   * parameter are in every bucket. A request is matched only against its own bucket.
   */
  private readonly buckets = new Map<string, Route<H>[]>();
  private readonly wildcard: Route<H>[] = [];

  add(method: string | string[], template: string, handler: H): this {
    const { regex, keys } = compileTemplate(template);
    const segment = firstSegment(template);
    const literal = !segment.includes('{');
    for (const m of Array.isArray(method) ? method : [method]) {
      const route = { method: m.toUpperCase(), regex, keys, handler };
      if (literal) {
        let bucket = this.buckets.get(segment);
        if (!bucket) {
          bucket = [...this.wildcard];
          this.buckets.set(segment, bucket);
        }
        bucket.push(route);
      } else {
        this.wildcard.push(route);
        for (const bucket of this.buckets.values()) bucket.push(route);
      }
    }
    return this;
  }

  get(template: string, handler: H): this {
    return this.add('GET', template, handler);
  }
  head(template: string, handler: H): this {
    return this.add('HEAD', template, handler);
  }
  post(template: string, handler: H): this {
    return this.add('POST', template, handler);
  }
  put(template: string, handler: H): this {
    return this.add('PUT', template, handler);
  }
  patch(template: string, handler: H): this {
    return this.add('PATCH', template, handler);
  }
  delete(template: string, handler: H): this {
    return this.add('DELETE', template, handler);
  }

  /**
   * Find the route for a method and a decoded path. `allowed` lists the methods that match the
   * path with another method, so a server can answer 405 instead of 404.
   */
  match(method: string, path: string): { found?: RouteMatch<H>; allowed: string[] } {
    const allowed: string[] = [];
    const upper = method.toUpperCase();
    const candidates = this.buckets.get(firstSegment(path)) ?? this.wildcard;
    for (const route of candidates) {
      const m = route.regex.exec(path);
      if (!m) continue;
      if (route.method !== upper) {
        if (!allowed.includes(route.method)) allowed.push(route.method);
        continue;
      }
      const params: Params = {};
      route.keys.forEach((key, i) => {
        params[key] = m[i + 1] ?? '';
      });
      return { found: { handler: route.handler, params }, allowed };
    }
    return { allowed };
  }
}
