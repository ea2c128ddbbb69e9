import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

/** One parsed text: its value (null for an empty document), or the parser's error message. */
export type YamlResult = { value: unknown } | { error: string };

/** Parses several YAML texts at once (YAML includes JSON). */
export type YamlParser = (texts: string[]) => YamlResult[];

const requireHere = createRequire(import.meta.url);
let yaml: typeof import('yaml') | undefined;

function parseOne(parse: (text: string) => unknown, text: string): YamlResult {
  try {
    return { value: parse(text) ?? null };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/**
 * In this process, through the `yaml` package loaded on first use. Loading it costs a serving
 * registry about 3 MiB of RSS for good (its code and what V8 compiled of it stay), hence
 * `parseYamlApart` for the configuration a server starts from.
 */
export const parseYamlHere: YamlParser = (texts) => {
  yaml ??= requireHere('yaml') as typeof import('yaml');
  const y = yaml;
  return texts.map((t) => parseOne((s) => y.parse(s), t));
};

/** What the child runs: reads {yaml, texts} on stdin, writes the results as JSON on stdout. */
const CHILD = `let s = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => { s += d; });
process.stdin.on('end', () => {
  const { yaml, texts } = JSON.parse(s);
  const y = require(yaml);
  const out = texts.map((t) => {
    try { const v = y.parse(t); return { value: v === undefined ? null : v }; }
    catch (e) { return { error: String(e && e.message) }; }
  });
  process.stdout.write(JSON.stringify(out));
});`;

/**
 * In a short-lived node process (one for all the texts), so that the process that asked never
 * loads the `yaml` package. Texts that are JSON are parsed here without it (YAML includes JSON;
 * the one difference: JSON.parse keeps the last of duplicate keys where YAML refuses them).
 * Values go back as JSON, which is all a configuration holds (maps, lists, strings, numbers,
 * booleans, null).
 */
export const parseYamlApart: YamlParser = (texts) => {
  const results: Array<YamlResult | undefined> = texts.map((t) => {
    try {
      return { value: JSON.parse(t) ?? null };
    } catch {
      return undefined;
    }
  });
  const rest = texts.filter((_, i) => results[i] === undefined);
  if (rest.length === 0) return results as YamlResult[];
  const child = spawnSync(process.execPath, ['-e', CHILD], {
    input: JSON.stringify({ yaml: requireHere.resolve('yaml'), texts: rest }),
    encoding: 'utf8',
    timeout: 60_000,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  let parsed: YamlResult[] | undefined;
  try {
    if (child.status === 0) parsed = JSON.parse(child.stdout) as YamlResult[];
  } catch {
    parsed = undefined;
  }
  if (!parsed || parsed.length !== rest.length) {
    const why = child.error?.message ?? (child.stderr.trim() || `exit status ${child.status}`);
    throw new Error(`cannot parse YAML in a child process (${process.execPath}): ${why}`);
  }
  let k = 0;
  return results.map((r) => r ?? (parsed[k++] as YamlResult));
};
