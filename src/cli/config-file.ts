import { readFile } from 'node:fs/promises';
import { errnoCode, errorMessage } from '../common/errors.js';
import { type FlagSpec, type Parsed, UsageError } from './args.js';

/**
 * The engine's configuration file in dockerd's daemon.json form: a JSON object whose keys are
 * the engine's flags, by dockerd's name (`hosts`, `insecure-registries`, `registry-mirrors`,
 * `default-runtime`; and `debug`, true for the debug log level) or by the flag's own name. It is read as dockerd reads its file:
 *
 * - the default file (/etc/berth/daemon.json) may be missing; a file named with --config-file
 *   must exist;
 * - keys that are no option are refused: `the following directives don't match any
 *   configuration option: a, b`;
 * - an option given both as a flag and in the file is refused: `the following directives are
 *   specified both as a flag and in the configuration file: log-level: (from flag: info, from
 *   file: debug)`;
 * - values are typed as dockerd types them (a list of strings, a string, a boolean, an int for
 *   max-concurrent-*), wrong ones refused in Go's words (`json: cannot unmarshal string into Go
 *   struct field Config.hosts of type []string`); a null sets nothing; berth's own options take
 *   a string or a number.
 *
 * The file's values become flag values (a Parsed), so that the flags' own parsing and checks
 * apply to both the same way.
 */

export const DEFAULT_CONFIG_FILE = '/etc/berth/daemon.json';

/** dockerd's key for a flag where it differs from the flag's name. */
const DOCKERD_NAMES: Record<string, string> = {
  host: 'hosts',
  'insecure-registry': 'insecure-registries',
  'registry-mirror': 'registry-mirrors',
  runtime: 'default-runtime',
};

/** Flags that are about the command line itself, never in the file. */
const NOT_IN_FILE = new Set(['help', 'config-file']);

/** Flags whose file value dockerd types as an int. */
const NUMERIC = new Set(['max-concurrent-downloads', 'max-concurrent-uploads']);

/** dockerd's keys of string options: a number there is refused, as by dockerd. */
const DOCKERD_STRING_KEYS = new Set([
  'data-root',
  'exec-root',
  'log-level',
  'bridge',
  'bip',
  'group',
  'tlscacert',
  'tlscert',
  'tlskey',
  'default-runtime',
]);

type FlagValue = string | boolean | string[];

/** A configuration file read: flag values by flag name, and the key each came from. */
export interface ConfigFile {
  path: string;
  values: Map<string, FlagValue>;
  keys: Map<string, string>;
  /** dockerd's `debug` (no flag of berth's): true makes the log level debug, whatever else says. */
  debug?: boolean;
}

/** The error of a bad file, in dockerd's words. */
export class ConfigFileError extends UsageError {
  constructor(path: string, message: string) {
    super(`unable to configure the engine with file ${path}: ${message}`);
  }
}

/** Every key the file may have, to its flag: dockerd's name and the flag's own. */
function fileKeys(spec: Record<string, FlagSpec>): Map<string, string> {
  const keys = new Map<string, string>();
  for (const flag of Object.keys(spec)) {
    if (NOT_IN_FILE.has(flag)) continue;
    keys.set(flag, flag);
    const dockerd = DOCKERD_NAMES[flag];
    if (dockerd) keys.set(dockerd, flag);
  }
  return keys;
}

function goType(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  return typeof value === 'object' ? 'object' : typeof value;
}

/** What Go's encoding/json calls a JSON value's kind in its errors. */
function jsonKind(value: unknown): string {
  if (typeof value === 'boolean') return 'bool';
  return goType(value);
}

/** Parse a file's text (pure: the unit tests' entry point). */
export function parseConfigFile(text: string, path: string, spec: Record<string, FlagSpec>): ConfigFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigFileError(path, `invalid JSON: ${errorMessage(err)}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new ConfigFileError(
      path,
      `json: cannot unmarshal ${jsonKind(json)} into Go value of type map[string]interface {}`,
    );
  }
  const known = fileKeys(spec);
  const entries = Object.entries(json as Record<string, unknown>);
  const unknown = entries.map(([k]) => k).filter((k) => !known.has(k) && k !== 'debug');
  if (unknown.length) {
    throw new ConfigFileError(
      path,
      `the following directives don't match any configuration option: ${unknown.join(', ')}`,
    );
  }
  const values = new Map<string, FlagValue>();
  const keys = new Map<string, string>();
  // Go's words for a value of the wrong type (dockerd decodes the file into its Config struct)
  const bad = (key: string, value: unknown, type: string) =>
    new ConfigFileError(
      path,
      `json: cannot unmarshal ${jsonKind(value)} into Go struct field Config.${key} of type ${type}`,
    );
  for (const [key, value] of entries) {
    // a null sets nothing, as for Go
    if (key === 'debug' || value === null) continue;
    const flag = known.get(key) as string;
    const kind = (spec[flag] as FlagSpec).kind;
    const other = keys.get(flag);
    if (other !== undefined) {
      throw new ConfigFileError(path, `"${other}" and "${key}" are the same option: give one of them`);
    }
    if (kind === 'bool') {
      if (typeof value !== 'boolean') throw bad(key, value, 'bool');
      values.set(flag, value);
    } else if (kind === 'list') {
      if (!Array.isArray(value)) throw bad(key, value, '[]string');
      const item = value.find((v) => typeof v !== 'string' && v !== null);
      if (item !== undefined) throw bad(key, item, 'string');
      values.set(
        flag,
        (value as Array<string | null>).map((v) => v ?? ''),
      );
    } else if (NUMERIC.has(flag)) {
      // dockerd's int: a whole number, no string
      if (typeof value !== 'number' || !Number.isInteger(value)) throw bad(key, value, 'int');
      values.set(flag, String(value));
    } else if (typeof value === 'string') {
      values.set(flag, value);
    } else if (typeof value === 'number' && !DOCKERD_STRING_KEYS.has(key)) {
      // berth's own sizes, counts and durations take a number too
      values.set(flag, String(value));
    } else {
      throw bad(key, value, 'string');
    }
    keys.set(flag, key);
  }
  // dockerd's "debug" (its -D): an option of its own; true makes the level debug
  const raw = (json as Record<string, unknown>).debug;
  const debug = raw === null ? undefined : raw;
  if (debug !== undefined && typeof debug !== 'boolean') throw bad('debug', debug, 'bool');
  return { path, values, keys, ...(debug !== undefined ? { debug } : {}) };
}

/**
 * Read the file at `path`. A missing file is no error unless `explicit` (named with
 * --config-file): undefined then.
 */
export async function readConfigFile(
  path: string,
  explicit: boolean,
  spec: Record<string, FlagSpec>,
): Promise<ConfigFile | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' && !explicit) return undefined;
    const go: Record<string, string> = {
      ENOENT: 'no such file or directory',
      EACCES: 'permission denied',
      EISDIR: 'is a directory',
    };
    throw new ConfigFileError(path, code && go[code] ? `open ${path}: ${go[code]}` : errorMessage(err));
  }
  return parseConfigFile(text, path, spec);
}

/** A flag's value as Go's flag.Value.String() prints it (lists as `[a b]`). */
function flagText(value: FlagValue): string {
  return Array.isArray(value) ? `[${value.join(' ')}]` : String(value);
}

/** A file value as Go's %v prints what encoding/json decoded. */
function fileText(value: FlagValue, numeric: boolean): string {
  if (Array.isArray(value)) return `[${value.join(' ')}]`;
  if (numeric && /^\d+$/.test(String(value)) && Number(value) >= 1e6) {
    return Number(value)
      .toExponential()
      .replace(/e([+-])(\d)$/, 'e$10$2');
  }
  return String(value);
}

/**
 * The flags and the file together: the file's values for the flags not given; a flag given in
 * both is refused as dockerd refuses it (all such flags named, in flag-name order).
 */
export function applyConfigFile(flags: Parsed, file: ConfigFile | undefined): Parsed {
  if (!file) return flags;
  const conflicts: string[] = [];
  for (const flag of [...file.values.keys()].sort()) {
    const given = flags.flags.get(flag);
    if (given === undefined) continue;
    const key = file.keys.get(flag) ?? flag;
    const fromFile = file.values.get(flag) as FlagValue;
    conflicts.push(
      `${key}: (from flag: ${flagText(given)}, from file: ${fileText(fromFile, NUMERIC.has(flag))})`,
    );
  }
  if (conflicts.length) {
    throw new ConfigFileError(
      file.path,
      `the following directives are specified both as a flag and in the configuration file: ${conflicts.join(', ')}`,
    );
  }
  const merged = new Map(flags.flags);
  for (const [flag, value] of file.values) merged.set(flag, value);
  if (file.debug) merged.set('log-level', 'debug');
  return { flags: merged, positional: flags.positional };
}

/** Which file to read for these flags: --config-file's (must exist) or the default (may not). */
export function configFileChoice(flags: Parsed): { path: string; explicit: boolean } {
  const given = flags.flags.get('config-file');
  return typeof given === 'string'
    ? { path: given, explicit: true }
    : { path: DEFAULT_CONFIG_FILE, explicit: false };
}
