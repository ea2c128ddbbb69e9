import { BlockList, isIP } from 'node:net';
import { type Constraint, parseConstraints } from '../services/constraints.js';
import type { StoredNode } from './cluster-view.js';

/**
 * Placement constraints as swarmkit reads them (manager/constraint): `key==value` or
 * `key!=value`; keys `node.id`, `node.hostname`, `node.ip` (an address or a network),
 * `node.role`, `node.platform.os`,
 * `node.platform.arch`, `node.labels.<label>`, `engine.labels.<label>`. Values compare without
 * regard to case; label names with it. A key of none of these kinds never matches.
 */
const NODE_LABELS = 'node.labels.';
const ENGINE_LABELS = 'engine.labels.';

function matches(c: Constraint, actual: string): boolean {
  const equal = c.value.toLowerCase() === actual.toLowerCase();
  return c.op === '==' ? equal : !equal;
}

/** `node.ip==10.0.0.5` or `node.ip==10.0.0.0/24` (swarmkit: an address or a network). */
function ipMatches(c: Constraint, addr: string): boolean {
  const family = isIP(addr);
  const [net = '', bits] = c.value.split('/');
  let inside = false;
  if (family !== 0 && isIP(net) === family) {
    const type = family === 6 ? 'ipv6' : 'ipv4';
    const list = new BlockList();
    if (bits === undefined) list.addAddress(net, type);
    else if (/^\d+$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32))
      list.addSubnet(net, Number(bits), type);
    inside = list.check(addr, type);
  }
  return c.op === '==' ? inside : !inside;
}

function startsWithFold(s: string, prefix: string): boolean {
  return s.length > prefix.length && s.slice(0, prefix.length).toLowerCase() === prefix;
}

/** Whether the node satisfies every constraint. */
export function nodeMatches(constraints: readonly Constraint[], node: StoredNode): boolean {
  for (const c of constraints) {
    const key = c.key.toLowerCase();
    const d = node.Description;
    let actual: string;
    if (key === 'node.id') actual = node.ID;
    else if (key === 'node.hostname') actual = d?.Hostname ?? '';
    else if (key === 'node.ip') {
      if (ipMatches(c, node.Status?.Addr ?? '')) continue;
      return false;
    } else if (key === 'node.role') actual = node.Spec?.Role ?? '';
    else if (key === 'node.platform.os') actual = d?.Platform?.OS ?? '';
    else if (key === 'node.platform.arch') actual = d?.Platform?.Architecture ?? '';
    else if (startsWithFold(c.key, NODE_LABELS))
      actual = node.Spec?.Labels?.[c.key.slice(NODE_LABELS.length)] ?? '';
    else if (startsWithFold(c.key, ENGINE_LABELS))
      actual = d?.Engine?.Labels?.[c.key.slice(ENGINE_LABELS.length)] ?? '';
    else return false;
    if (!matches(c, actual)) return false;
  }
  return true;
}

/** Constraints of a placement, or none when they do not parse (the API refused those already). */
export function constraintsOf(exprs: readonly string[] | undefined): Constraint[] | undefined {
  if (!exprs || exprs.length === 0) return [];
  try {
    return parseConstraints(exprs);
  } catch {
    return undefined;
  }
}
