import type { Access } from './authorizer.js';

/**
 * One access rule of the built-in token server. A rule applies to a request when its subject
 * matches (`account`: a glob on the user name, `*` = any authenticated user; `group`: a group of
 * the config's `groups` map; `anonymous: true`: everyone, with or without credentials) and the resource
 * matches (`type`, default `repository`; `name`: a glob in which `*` matches any characters,
 * '/' included, `?` one character, and `${account}` stands for the user's name). It grants the
 * listed actions (`pull`, `push`, `delete`, `*` for all).
 */
export interface AclRule {
  account?: string;
  group?: string;
  anonymous?: boolean;
  type?: 'repository' | 'registry';
  name: string;
  actions: string[];
}

export interface AclSubject {
  /** Authenticated user name; undefined for anonymous requests. */
  account?: string;
}

/** Validate rules read from config; throws with the rule's position on a problem. */
export function validateAcl(raw: unknown, where = 'acl'): AclRule[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new Error(`${where}: expected a list of rules`);
  return raw.map((r, i) => {
    const at = `${where}[${i}]`;
    if (!r || typeof r !== 'object') throw new Error(`${at}: expected an object`);
    const rule = r as Record<string, unknown>;
    const known = ['account', 'group', 'anonymous', 'type', 'name', 'actions'];
    for (const k of Object.keys(rule)) if (!known.includes(k)) throw new Error(`${at}: unknown field ${k}`);
    const out: AclRule = { name: '', actions: [] };
    if (rule.account !== undefined) {
      if (typeof rule.account !== 'string' || rule.account === '')
        throw new Error(`${at}.account: expected a name or glob`);
      out.account = rule.account;
    }
    if (rule.group !== undefined) {
      if (typeof rule.group !== 'string' || rule.group === '')
        throw new Error(`${at}.group: expected a group name`);
      out.group = rule.group;
    }
    if (rule.anonymous !== undefined) {
      if (typeof rule.anonymous !== 'boolean') throw new Error(`${at}.anonymous: expected true or false`);
      out.anonymous = rule.anonymous;
    }
    if (out.account === undefined && out.group === undefined && !out.anonymous) {
      throw new Error(`${at}: say whom the rule is for (account, group or anonymous: true)`);
    }
    if (rule.type !== undefined && rule.type !== 'repository' && rule.type !== 'registry') {
      throw new Error(`${at}.type: expected repository or registry`);
    }
    if (rule.type) out.type = rule.type as 'repository' | 'registry';
    if (typeof rule.name !== 'string' || rule.name === '')
      throw new Error(`${at}.name: expected a name or glob`);
    out.name = rule.name;
    if (!Array.isArray(rule.actions) || !rule.actions.every((a) => typeof a === 'string')) {
      throw new Error(`${at}.actions: expected a list of actions`);
    }
    out.actions = rule.actions as string[];
    return out;
  });
}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function globSource(glob: string): string {
  let source = '';
  for (const ch of glob) {
    if (ch === '*') source += '.*';
    else if (ch === '?') source += '.';
    else source += escapeRegex(ch);
  }
  return source;
}

export function globToRegExp(glob: string): RegExp {
  return new RegExp(`^${globSource(glob)}$`, 's');
}

const ACCOUNT_PLACEHOLDER = '$' + '{account}';

/** A rule's name glob with `${account}` replaced by the (literal) account name. */
export function nameRegExp(glob: string, account: string): RegExp {
  const parts = glob.split(ACCOUNT_PLACEHOLDER);
  return new RegExp(`^${parts.map(globSource).join(escapeRegex(account))}$`, 's');
}

/**
 * Access-control lists: decide what a subject gets out of what it asked for. With no rules, every
 * authenticated user gets everything asked and anonymous requests get nothing (as htpasswd auth).
 */
export class Acl {
  private readonly rules: Array<AclRule & { account$?: RegExp }>;
  private readonly groups: Map<string, Set<string>>;

  constructor(rules: AclRule[], groups: Record<string, string[]> = {}) {
    this.rules = rules.map((r) => (r.account ? { ...r, account$: globToRegExp(r.account) } : { ...r }));
    this.groups = new Map(Object.entries(groups).map(([g, users]) => [g, new Set(users)]));
  }

  /** The granted part of each requested entry; every requested resource appears, maybe with no actions. */
  grant(subject: AclSubject, requested: readonly Access[]): Access[] {
    return requested.map((want) => {
      const allowed = new Set<string>();
      if (this.rules.length === 0) {
        if (subject.account !== undefined) for (const a of want.actions) allowed.add(a);
      } else {
        for (const rule of this.rules) {
          if (!this.subjectMatches(rule, subject)) continue;
          if ((rule.type ?? 'repository') !== want.type) continue;
          if (!nameRegExp(rule.name, subject.account ?? '').test(want.name)) continue;
          for (const action of want.actions) {
            if (rule.actions.includes('*') || rule.actions.includes(action)) allowed.add(action);
          }
        }
      }
      return { type: want.type, name: want.name, actions: want.actions.filter((a) => allowed.has(a)) };
    });
  }

  private subjectMatches(rule: AclRule & { account$?: RegExp }, subject: AclSubject): boolean {
    // What anonymous clients may do, every authenticated user may do too.
    if (rule.anonymous === true) return true;
    if (subject.account === undefined) return false;
    if (rule.account$?.test(subject.account)) return true;
    if (rule.group && this.groups.get(rule.group)?.has(subject.account)) return true;
    return false;
  }
}
