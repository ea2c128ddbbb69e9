import { invalidParameter } from '../../../common/errors.js';
import type { RunMount } from '../build.types.js';

/** `RUN --mount=…` values parsed as buildkit's runmount.go does (keys, aliases, defaults, checks). */

export const MOUNT_TYPES = ['bind', 'cache', 'tmpfs', 'secret', 'ssh'] as const;
export const SHARING_MODES = ['shared', 'private', 'locked'] as const;

/** One record of Go's encoding/csv: comma-separated fields, `"…"` quoting with `""` for a quote. */
export function csvFields(value: string): string[] {
  const fields: string[] = [];
  let i = 0;
  for (;;) {
    let field = '';
    if (value[i] === '"') {
      i++;
      for (;;) {
        if (i >= value.length)
          throw invalidParameter(`failed to parse csv mounts: extraneous or missing " in quoted-field`);
        if (value[i] === '"') {
          if (value[i + 1] === '"') {
            field += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        field += value[i];
        i++;
      }
      if (i < value.length && value[i] !== ',')
        throw invalidParameter(`failed to parse csv mounts: extraneous or missing " in quoted-field`);
    } else {
      const comma = value.indexOf(',', i);
      const end = comma < 0 ? value.length : comma;
      field = value.slice(i, end);
      if (field.includes('"'))
        throw invalidParameter(`failed to parse csv mounts: bare " in non-quoted-field`);
      i = end;
    }
    fields.push(field);
    if (i >= value.length) return fields;
    i++; // the comma
  }
}

/** strconv.ParseBool */
export function parseGoBool(value: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return undefined;
}

/** strconv.ParseUint(value, base, 32) */
function parseUint32(value: string, base: 8 | 10): number | undefined {
  const re = base === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!re.test(value)) return undefined;
  const n = Number.parseInt(value, base);
  return n <= 0xffffffff ? n : undefined;
}

const RAM_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  m: 1024 ** 2,
  g: 1024 ** 3,
  t: 1024 ** 4,
  p: 1024 ** 5,
};

/** go-units RAMInBytes: `64m`, `1g`, `512kb`, `100` (binary multiples). */
export function ramInBytes(value: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?) ?([kKmMgGtTpP]?)[iI]?[bB]?$/.exec(value);
  if (!m) return undefined;
  const unit = RAM_UNITS[(m[2] as string).toLowerCase()] as number;
  return Math.floor(Number(m[1]) * unit);
}

export function parseRunMount(value: string): RunMount {
  let type: RunMount['type'] = 'bind';
  const m: Omit<RunMount, 'type' | 'target' | 'readonly'> & { target: string; readonly: boolean } = {
    target: '',
    readonly: false,
  };
  let roAuto = true;
  for (const field of csvFields(value)) {
    const eq = field.indexOf('=');
    const key = (eq < 0 ? field : field.slice(0, eq)).toLowerCase();
    const val = eq < 0 ? '' : field.slice(eq + 1);
    if (eq < 0) {
      if (key === 'required') {
        if (type !== 'secret' && type !== 'ssh')
          throw invalidParameter(`unexpected key '${key}' for mount type '${type}'`);
        continue;
      }
      if (key === 'readonly' || key === 'ro') m.readonly = true;
      else if (key === 'readwrite' || key === 'rw') m.readonly = false;
      else throw invalidParameter(`invalid field '${field}' must be a key=value pair`);
      roAuto = false;
      continue;
    }
    switch (key) {
      case 'type': {
        const t = val.toLowerCase();
        if (!(MOUNT_TYPES as readonly string[]).includes(t))
          throw invalidParameter(`unsupported mount type "${val}"`);
        type = t as RunMount['type'];
        break;
      }
      case 'from':
        m.from = val;
        break;
      case 'source':
      case 'src':
        m.source = val;
        break;
      case 'target':
      case 'dst':
      case 'destination':
        m.target = val;
        break;
      case 'readonly':
      case 'ro':
      case 'readwrite':
      case 'rw': {
        const b = parseGoBool(val);
        if (b === undefined) throw invalidParameter(`invalid value for ${key}: ${val}`);
        m.readonly = key === 'readonly' || key === 'ro' ? b : !b;
        roAuto = false;
        break;
      }
      case 'required':
        if (type !== 'secret' && type !== 'ssh')
          throw invalidParameter(`unexpected key '${key}' for mount type '${type}'`);
        if (parseGoBool(val) === undefined) throw invalidParameter(`invalid value for ${key}: ${val}`);
        break;
      case 'size': {
        if (type !== 'tmpfs') throw invalidParameter(`unexpected key '${key}' for mount type '${type}'`);
        const size = ramInBytes(val);
        if (size === undefined) throw invalidParameter(`invalid value for ${key}: ${val}`);
        m.size = size;
        break;
      }
      case 'id':
        m.id = val;
        break;
      case 'sharing': {
        const s = val.toLowerCase();
        if (!(SHARING_MODES as readonly string[]).includes(s))
          throw invalidParameter(`unsupported sharing value "${val}"`);
        m.sharing = s as RunMount['sharing'];
        break;
      }
      case 'mode':
      case 'uid':
      case 'gid': {
        const n = parseUint32(val, key === 'mode' ? 8 : 10);
        if (n === undefined) throw invalidParameter(`invalid value ${val} for ${key}`);
        m[key] = n;
        break;
      }
      case 'env':
        if (type !== 'secret') throw invalidParameter(`unexpected key '${key}' for mount type '${type}'`);
        break;
      default:
        throw invalidParameter(`unexpected key '${key}' in '${field}'`);
    }
  }
  if (type !== 'secret' && type !== 'ssh' && type !== 'cache') {
    for (const k of ['mode', 'uid', 'gid'] as const) {
      if (m[k] !== undefined) throw invalidParameter(`${k} not allowed for "${type}" type mounts`);
    }
  }
  if (roAuto) m.readonly = !(type === 'cache' || type === 'tmpfs');
  if (m.sharing !== undefined && type !== 'cache')
    throw invalidParameter(`invalid cache sharing set for ${type} mount`);
  if (type === 'secret') {
    if (m.from !== undefined) throw invalidParameter('secret mount should not have a from');
    if (m.source === undefined && m.target === '' && m.id === undefined)
      throw invalidParameter('invalid secret mount. one of source, target required');
    if (m.source !== undefined && m.id !== undefined)
      throw invalidParameter("both source and id can't be set");
  } else if (type !== 'ssh' && m.target === '') {
    throw invalidParameter(`mount type ${type} requires a target`);
  }
  return { type, ...m };
}
