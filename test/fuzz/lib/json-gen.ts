import type { Fields, Node } from '../../../src/engine/api/schema/go-json.js';
import type { Rng } from './rng.js';
import { anyNumber, anyString, word } from './values.js';

/**
 * JSON bodies drawn from the engine's request schemas (src/engine/api/schema: moby's structs as
 * go-json nodes): each field present now and then, mostly of its type, sometimes of another, null,
 * out of range or huge; then the text itself mutated (truncated, nested deep, padded, not UTF-8).
 */

/** A value for a field, chosen by the caller (image names, commands...); undefined: the generator's. */
export type Hint = (path: readonly string[], rng: Rng) => unknown | undefined;

export interface GenOptions {
  /** How likely each field of a struct is present (default 0.12). */
  density?: number;
  hint?: Hint;
  /** How likely a value is of another JSON type than the field's (default 0.12). */
  wrongRate?: number;
  /** Values left to make in this body (bounded whatever the nesting of big lists; default 30,000). */
  budget?: { left: number };
  /** Fields always present (the hint or the generator gives their value). */
  force?: (path: readonly string[], rng: Rng) => boolean;
}

const MAX_DEPTH = 6;

/** A JSON value of any kind (wrong types for a field). */
export function anyJson(rng: Rng, depth = 0): unknown {
  const k = depth > 3 ? rng.int(0, 3) : rng.int(0, 5);
  switch (k) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return anyNumber(rng);
    case 3:
      return anyString(rng, 40);
    case 4:
      return Array.from({ length: rng.size(5) }, () => anyJson(rng, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      const n = rng.size(5);
      for (let i = 0; i < n; i++) out[word(rng)] = anyJson(rng, depth + 1);
      return out;
    }
  }
}

function intValue(rng: Rng, node: Extract<Node, { k: 'int' }>): number {
  switch (rng.int(0, 6)) {
    case 0:
      return node.min;
    case 1:
      return node.max;
    case 2:
      return rng.pick([node.min - 1, node.max + 1, node.max * 2, -1, 1.5, 1e300]);
    case 3:
      return anyNumber(rng);
    default:
      return rng.int(Math.max(node.min, -1000), Math.min(node.max, 1_000_000_000));
  }
}

/** A value of a node's type (mostly), or of another type. */
export function genNode(rng: Rng, node: Node, path: string[], opts: GenOptions): unknown {
  const budget = opts.budget ?? { left: 30_000 };
  opts = { ...opts, budget };
  budget.left--;
  if (budget.left < 0) return null;
  const hinted = opts.hint?.(path, rng);
  if (hinted !== undefined) return hinted;
  const r = rng.float();
  const wrong = opts.wrongRate ?? 0.12;
  if (r < wrong / 3) return null;
  if (r < wrong || path.length > MAX_DEPTH) return anyJson(rng, 2);
  switch (node.k) {
    case 'bool':
      return rng.chance(0.5);
    case 'string':
      return anyString(rng, 100);
    case 'int':
      return intValue(rng, node);
    case 'strslice':
      if (rng.chance(0.3)) return anyString(rng, 40);
      return Array.from({ length: rng.size(6) }, () => (rng.chance(0.05) ? null : anyString(rng, 40)));
    case 'array': {
      const n = rng.chance(0.02) ? Math.min(rng.int(1000, 20_000), budget.left) : rng.size(5);
      return Array.from({ length: n }, (_, i) =>
        rng.chance(0.05) ? null : genNode(rng, node.elem, [...path, String(i)], opts),
      );
    }
    case 'map': {
      const out: Record<string, unknown> = {};
      const n = rng.chance(0.02) ? Math.min(rng.int(1000, 5000), budget.left) : rng.size(5);
      for (let i = 0; i < n; i++) {
        const key = rng.chance(0.7) ? anyString(rng, 30) : `k${i}`;
        Object.defineProperty(out, key, {
          value: rng.chance(0.05) ? null : genNode(rng, node.elem, [...path, key], opts),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    case 'empty':
      return rng.chance(0.8) ? {} : anyJson(rng, 3);
    case 'struct':
      return genStruct(rng, node.fields, path, opts);
  }
}

/** Go matches keys case-insensitively: send some as another case. */
function keyCase(rng: Rng, key: string): string {
  const r = rng.float();
  if (r < 0.9) return key;
  if (r < 0.95) return key.toLowerCase();
  return key.toUpperCase();
}

/** An object of a struct's fields: each present with the density, a few unknown keys now and then. */
export function genStruct(
  rng: Rng,
  fields: Fields,
  path: string[],
  opts: GenOptions,
): Record<string, unknown> {
  opts = { ...opts, budget: opts.budget ?? { left: 30_000 } };
  const out: Record<string, unknown> = {};
  const density = opts.density ?? 0.12;
  for (const [name, node] of Object.entries(fields)) {
    const p = [...path, name];
    if (!opts.force?.(p, rng) && !rng.chance(density)) continue;
    out[keyCase(rng, name)] = genNode(rng, node, p, opts);
  }
  if (rng.chance(0.1)) out[anyString(rng, 20)] = anyJson(rng, 1);
  return out;
}

/** Nested `depth` times: arrays or objects. */
export function deepNesting(rng: Rng, depth: number): string {
  if (rng.chance(0.5)) return `${'['.repeat(depth)}${']'.repeat(depth)}`;
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

/**
 * The bytes of a JSON body: the value's text, mostly as is, else mutated as a body may come
 * broken: truncated, nested very deep, very large, not an object, not UTF-8, with a BOM.
 */
export function jsonBytes(rng: Rng, value: unknown): Buffer {
  const text = JSON.stringify(value) ?? 'null';
  const r = rng.float();
  if (r < 0.7) return Buffer.from(text);
  switch (rng.int(0, 13)) {
    case 0:
      return Buffer.from(text.slice(0, rng.int(0, Math.max(0, text.length - 1))));
    case 1:
      return Buffer.from(deepNesting(rng, rng.pick([100, 5000, 100_000])));
    case 2:
      return Buffer.from(
        `{"Image":"busybox","Labels":{"pad":"${'x'.repeat(rng.pick([100_000, 2_000_000]))}"}}`,
      );
    case 3:
      return Buffer.from(rng.pick(['null', '[]', '1', '"x"', 'true', '{}', '', ' ', '[{}]', '{"":""}']));
    case 4:
      return Buffer.from(`[${text}]`);
    case 5:
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    case 6:
      return Buffer.concat([
        Buffer.from(text.slice(0, 5)),
        Buffer.from([0xff, 0xfe, 0xc0, 0x80]),
        Buffer.from(text.slice(5)),
      ]);
    case 7:
      return Buffer.from(`${text}${text}`);
    case 8:
      return Buffer.from(text.replace(/:/, ':{"nested":'.repeat(rng.int(1, 50))));
    case 9:
      return Buffer.from(`{"a":1,"A":2,"a":3, ${text.slice(1)}`);
    case 10:
      return rng.bytes(rng.size(2048));
    case 11:
      return Buffer.from(`${text} // comment`);
    case 12:
      return Buffer.from(
        `{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},${text.slice(1)}`,
      );
    default:
      return Buffer.from(text.replace(/"/g, "'"));
  }
}
