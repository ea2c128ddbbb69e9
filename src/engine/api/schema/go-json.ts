import { invalidParameter } from '../../../common/errors.js';

/**
 * A decoder that reads a JSON body the way Go's encoding/json fills a struct: keys match struct
 * fields exactly or else case-insensitively, unknown keys are dropped, `null` leaves a field
 * unset, a value of the wrong JSON type or a number that does not fit the field's integer type is
 * refused with the message Go gives (dockerd answers it with 500; berth with 400). The schemas
 * beside this file describe moby's request structs with these nodes.
 */

export type Node =
  | { k: 'bool'; go: string }
  | { k: 'string'; go: string }
  /** An integer type: Go refuses fractions and values out of range (`number 1.5`). */
  | { k: 'int'; go: string; min: number; max: number }
  /** A float type (float32, float64): any JSON number. */
  | { k: 'float'; go: string }
  /** strslice.StrSlice: a string or an array of strings (decoded to an array). */
  | { k: 'strslice' }
  | { k: 'array'; go: string; elem: Node }
  | { k: 'map'; go: string; elem: Node }
  /** `struct {}`: any object. */
  | { k: 'empty' }
  /** `name` is what Go's errors call the struct (`HostConfig`), `go` its qualified type. */
  | { k: 'struct'; go: string; name: string; fields: Fields };

export type Fields = Record<string, Node>;

export const bool: Node = { k: 'bool', go: 'bool' };
export const str: Node = { k: 'string', go: 'string' };
export const named = (go: string): Node => ({ k: 'string', go });
export const int = (go: string, min: number, max: number): Node => ({ k: 'int', go, min, max });
// JSON numbers are doubles: 2^63 - 1 reads as 2^63, so the bound is inclusive of that.
export const int64 = int('int64', -(2 ** 63), 2 ** 63);
export const goInt = int('int', -(2 ** 63), 2 ** 63);
export const uint16 = int('uint16', 0, 65535);
export const uint32 = int('uint32', 0, 2 ** 32 - 1);
export const uint64 = int('uint64', 0, 2 ** 64);
export const float32: Node = { k: 'float', go: 'float32' };
export const uint = int('uint', 0, 2 ** 64);
export const duration = int('time.Duration', -(2 ** 63), 2 ** 63);
export const fileMode = int('fs.FileMode', 0, 2 ** 32 - 1);
export const strslice: Node = { k: 'strslice' };
export const strings: Node = { k: 'array', go: '[]string', elem: str };
export const stringMap: Node = { k: 'map', go: 'map[string]string', elem: str };
export const struct = (go: string, fields: Fields): Node => ({
  k: 'struct',
  go,
  name: go.slice(go.lastIndexOf('.') + 1),
  fields,
});
export const array = (go: string, elem: Node): Node => ({ k: 'array', go, elem });

/** Field lookup: exact name first, then the first field equal to the key ignoring case (Go). */
const folded = new WeakMap<Fields, Map<string, string>>();
function fieldName(fields: Fields, key: string): string | undefined {
  if (Object.hasOwn(fields, key)) return key;
  let byLower = folded.get(fields);
  if (!byLower) {
    byLower = new Map();
    for (const name of Object.keys(fields)) {
      const lower = name.toLowerCase();
      if (!byLower.has(lower)) byLower.set(lower, name);
    }
    folded.set(fields, byLower);
  }
  return byLower.get(key.toLowerCase());
}

/** Where a value sits, for Go's message: the enclosing struct's name and the path of field names. */
interface At {
  struct: string;
  path: string[];
}

function jsonKind(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  return typeof v; // string, number, object
}

function typeError(v: unknown, node: Node, at: At, literal = false): Error {
  const what = literal ? `number ${String(v)}` : jsonKind(v);
  const go = node.k === 'strslice' ? 'string' : node.k === 'empty' ? 'struct {}' : node.go;
  return invalidParameter(
    `json: cannot unmarshal ${what} into Go struct field ${at.struct}.${at.path.join('.')} of type ${go}`,
  );
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * What a `null` array element or map value becomes: Go's zero value for scalars; `null` for
 * structs and lists, which validation refuses where an entry is needed.
 */
function zero(node: Node): unknown {
  switch (node.k) {
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'int':
    case 'float':
      return 0;
    case 'empty':
      return {};
    default:
      return null;
  }
}

function decodeValue(v: unknown, node: Node, at: At): unknown {
  switch (node.k) {
    case 'bool':
      if (typeof v !== 'boolean') throw typeError(v, node, at);
      return v;
    case 'string':
      if (typeof v !== 'string') throw typeError(v, node, at);
      return v;
    case 'int':
      if (typeof v !== 'number') throw typeError(v, node, at);
      if (!Number.isInteger(v) || v < node.min || v > node.max) throw typeError(v, node, at, true);
      return v;
    case 'float':
      if (typeof v !== 'number') throw typeError(v, node, at);
      return v;
    case 'strslice':
      // StrSlice.UnmarshalJSON: an array of strings, else one string (Go reports the second try)
      if (typeof v === 'string') return [v];
      if (!Array.isArray(v)) throw typeError(v, node, at);
      return v.map((s) => {
        if (s === null) return '';
        if (typeof s !== 'string') throw typeError(v, node, at);
        return s;
      });
    case 'empty':
      if (!isObject(v)) throw typeError(v, node, at);
      return {};
    case 'array': {
      if (!Array.isArray(v)) throw typeError(v, node, at);
      return v.map((e) => (e === null ? zero(node.elem) : decodeValue(e, node.elem, at)));
    }
    case 'map': {
      if (!isObject(v)) throw typeError(v, node, at);
      const out: Record<string, unknown> = {};
      for (const [key, e] of Object.entries(v)) {
        const value = e === null ? zero(node.elem) : decodeValue(e, node.elem, at);
        // a data key (`__proto__` too) as an own property, never a prototype
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
    case 'struct':
      if (!isObject(v)) throw typeError(v, node, at);
      return decodeStruct(v, node.fields, node.name, at.path);
  }
}

export function decodeStruct(
  v: Record<string, unknown>,
  fields: Fields,
  name: string,
  path: string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(v)) {
    const field = fieldName(fields, key);
    if (field === undefined) continue; // unknown: ignored, as Go does
    const node = fields[field] as Node;
    out[field] = value === null ? null : decodeValue(value, node, { struct: name, path: [...path, field] });
  }
  return out;
}
