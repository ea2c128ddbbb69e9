import { invalidParameter } from '../../common/errors.js';
import type { Access } from './authorizer.js';

/**
 * Parse one scope of Docker's token grammar: `repository:<name>:<action>[,<action>...]` or
 * `registry:catalog:*`. A resource class (`repository(plugin)`) is accepted and dropped. The name
 * may itself contain ':' (a host:port prefix), so the type ends at the first ':' and the actions
 * start after the last one.
 */
export function parseScope(scope: string): Access {
  const first = scope.indexOf(':');
  const last = scope.lastIndexOf(':');
  if (first <= 0 || last === first) throw invalidParameter(`invalid scope ${JSON.stringify(scope)}`);
  const type = scope.slice(0, first).replace(/\(.*\)$/, '');
  const name = scope.slice(first + 1, last);
  const actions = scope
    .slice(last + 1)
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '');
  if (type !== 'repository' && type !== 'registry') {
    throw invalidParameter(
      `invalid scope ${JSON.stringify(scope)}: unknown resource type ${JSON.stringify(type)}`,
    );
  }
  if (name === '') throw invalidParameter(`invalid scope ${JSON.stringify(scope)}: empty name`);
  return { type, name, actions: [...new Set(actions)] };
}

/**
 * Parse the `scope` query values of a token request. Docker sends one parameter per scope, some
 * clients one parameter holding several scopes separated by spaces.
 */
export function parseScopes(values: string[]): Access[] {
  const out: Access[] = [];
  for (const value of values) {
    for (const part of value.split(' ')) {
      if (part !== '') out.push(parseScope(part));
    }
  }
  return mergeAccess(out);
}

/** Merge entries of the same resource, union of their actions, keeping first-seen order. */
export function mergeAccess(list: Access[]): Access[] {
  const byKey = new Map<string, Access>();
  for (const a of list) {
    const key = `${a.type}\u0000${a.name}`;
    const seen = byKey.get(key);
    if (seen) {
      for (const action of a.actions) if (!seen.actions.includes(action)) seen.actions.push(action);
    } else {
      byKey.set(key, { type: a.type, name: a.name, actions: [...a.actions] });
    }
  }
  return [...byKey.values()];
}

/** Whether the granted entries allow every action of every wanted entry. `*` grants every action. */
export function covers(granted: readonly Access[], wanted: readonly Access[]): boolean {
  return missingAccess(granted, wanted).length === 0;
}

/** The wanted entries (with only their missing actions) that the granted ones do not cover. */
export function missingAccess(granted: readonly Access[], wanted: readonly Access[]): Access[] {
  const missing: Access[] = [];
  for (const w of wanted) {
    const have = new Set<string>();
    for (const g of granted) {
      if (g.type === w.type && g.name === w.name) for (const a of g.actions) have.add(a);
    }
    if (have.has('*')) continue;
    const lacking = w.actions.filter((a) => !have.has(a));
    if (lacking.length > 0) missing.push({ type: w.type, name: w.name, actions: lacking });
  }
  return missing;
}

/** The `scope` challenge parameter: scopes separated by spaces. */
export function scopeParam(access: readonly Access[]): string {
  return access.map((a) => `${a.type}:${a.name}:${a.actions.join(',')}`).join(' ');
}

/** Quote a challenge parameter value (RFC 7235 quoted-string). */
export function quoteParam(value: string): string {
  return `"${value.replace(/["\\]/g, '\\$&')}"`;
}
