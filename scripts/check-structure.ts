/**
 * The structure rules of src/, checked on every lint (npm run lint, scripts/test.sh):
 * - no import circle between files, type-only imports included;
 * - the layers' "never" rules: backends under src/engine/ (all but api/ and the composition root
 *   daemon.ts) import neither the wire (src/engine/api/) nor the HTTP kit (src/http/); the kit
 *   and src/common/ know no engine or registry; the registry stands apart from the engine.
 * Prints every breach with the import that makes it and exits 1 if there is any.
 *
 *   node --import tsx scripts/check-structure.ts [root]
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..'));
const src = join(root, 'src');

/** [who (path prefix), may not import (path prefix), why]; `except` paths are exempt. */
const NEVER: Array<{ from: string; to: string; why: string; except?: string[] }> = [
  {
    from: 'src/engine/',
    to: 'src/engine/api/',
    why: 'backends never import the wire',
    except: ['src/engine/api/', 'src/engine/daemon.ts'],
  },
  {
    from: 'src/engine/',
    to: 'src/http/',
    why: 'backends speak no HTTP',
    except: ['src/engine/api/', 'src/engine/daemon.ts'],
  },
  { from: 'src/http/', to: 'src/engine/', why: 'the HTTP kit knows no engine' },
  { from: 'src/http/', to: 'src/registry/', why: 'the HTTP kit knows no registry' },
  { from: 'src/common/', to: 'src/engine/', why: 'common is the ground' },
  { from: 'src/common/', to: 'src/registry/', why: 'common is the ground' },
  { from: 'src/common/', to: 'src/http/', why: 'common is the ground' },
  { from: 'src/registry/', to: 'src/engine/', why: 'the registry stands apart from the engine' },
  { from: 'src/registry/', to: 'src/cli/', why: 'the registry does not reach up' },
  { from: 'src/engine/', to: 'src/cli/', why: 'the engine does not reach up' },
  { from: 'src/engine/', to: 'src/registry/', why: 'the engine reaches the registry over HTTP only' },
];

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** Every module a file names: import/export ... from, import type, import('...'), bare import. */
const SPECIFIERS = [
  /(?:^|[\s;])(?:import|export)\s[^'"`;]*?\sfrom\s*['"]([^'"]+)['"]/g,
  /(?:^|[\s;])import\s*['"]([^'"]+)['"]/g,
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
];

/** The file's text without comments (an import in a doc comment is not one). */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

function resolveImport(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(from), spec);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

const files = sourceFiles(src);
const rel = (f: string) => relative(root, f);
const graph = new Map<string, Set<string>>();
for (const file of files) {
  const text = code(readFileSync(file, 'utf8'));
  const deps = new Set<string>();
  for (const re of SPECIFIERS) {
    for (const m of text.matchAll(re)) {
      const target = resolveImport(file, m[1] ?? '');
      if (target) deps.add(target);
    }
  }
  graph.set(file, deps);
}

const problems: string[] = [];

for (const [file, deps] of graph) {
  const from = rel(file);
  for (const dep of deps) {
    const to = rel(dep);
    for (const rule of NEVER) {
      if (!from.startsWith(rule.from) || !to.startsWith(rule.to)) continue;
      if (rule.except?.some((e) => from.startsWith(e))) continue;
      problems.push(`${from} imports ${to}: ${rule.why}`);
    }
  }
}

// Tarjan's strongly connected components: every component of more than one file is a circle.
let index = 0;
const indices = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const circles: string[][] = [];
function connect(v: string): void {
  indices.set(v, index);
  low.set(v, index);
  index++;
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!indices.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
    } else if (onStack.has(w)) {
      low.set(v, Math.min(low.get(v) ?? 0, indices.get(w) ?? 0));
    }
  }
  if (low.get(v) === indices.get(v)) {
    const component: string[] = [];
    let w: string | undefined;
    do {
      w = stack.pop();
      if (w === undefined) break;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.has(v)) circles.push(component);
  }
}
for (const file of files) if (!indices.has(file)) connect(file);

for (const circle of circles) {
  const members = new Set(circle);
  const edges = circle.flatMap((f) =>
    [...(graph.get(f) ?? [])].filter((d) => members.has(d)).map((d) => `    ${rel(f)} -> ${rel(d)}`),
  );
  problems.push(`import circle of ${circle.length} files:\n${edges.sort().join('\n')}`);
}

if (problems.length) {
  for (const p of problems) console.error(p);
  console.error(`\n${problems.length} structure problem(s) in ${files.length} files`);
  process.exit(1);
}
console.log(`structure: ${files.length} files, no import circle, no forbidden import`);
