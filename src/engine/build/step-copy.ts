import { posix } from 'node:path';
import { invalidParameter } from '../../common/errors.js';
import type { BuildContext, CopyPlan, CopySource, CopyTar, Instruction } from './build.types.js';
import type { CopySupport, DockerfileSupport } from './builder.ports.js';
import type { ImageRoots } from './image-roots.js';
import type { StageState } from './stage-state.js';
import { nopArgv, shellOf } from './step-metadata.js';

type CopyInstruction = Extract<Instruction, { kind: 'copy' | 'add' }>;

export interface CopyStepInput {
  state: StageState;
  /** The instruction, expanded. */
  instruction: CopyInstruction;
  ctx: BuildContext;
  dockerfile: DockerfileSupport;
  copy: CopySupport;
  roots: ImageRoots;
  signal: AbortSignal;
  /** The files of a stage or image (`--from`). */
  stageRoot(name: string): Promise<string>;
}

/** The writable filesystem a copy goes into (a snapshot of the step's image), then committed. */
export interface CopyWorkspace {
  /** What a path is in it (links followed inside it), or undefined. */
  kindOf(path: string): Promise<'dir' | 'other' | undefined>;
  write(tar: CopyTar): Promise<void>;
  /** The stage's next image from it (cached under `sources`). */
  commit(cmd: string[], sources: string): Promise<void>;
  release(): Promise<void>;
}

/** What the copy step asks of the stage runner: the cache, and a workspace. */
export interface CopyStepHooks {
  cached(cmd: string[], sources: string): Promise<boolean>;
  workspace(): Promise<CopyWorkspace>;
}

const isUrl = (s: string): boolean => /^https?:\/\//i.test(s);
const heredocName = (s: string): string | undefined => /^<<-?["']?([^"']+)["']?$/.exec(s)?.[1];

/** A chmod of COPY/ADD: octal, as buildkit reads it. */
function parseChmod(text: string): number {
  if (!/^[0-7]{1,4}$/.test(text)) throw invalidParameter(`invalid chmod parameter: ${text}`);
  return Number.parseInt(text, 8);
}

/**
 * COPY and ADD as dockerd's classic builder: the sources resolved and checksummed (the cache key
 * and the `#(nop) COPY <sum> in <dest> ` history), then a tar of them extracted into a container
 * of the step's image and committed, without running anything. ADD fetches URLs and unpacks
 * local archives; heredocs are files.
 */
export async function copyStep(input: CopyStepInput, hooks: CopyStepHooks): Promise<void> {
  const { instruction: i, state, copy } = input;
  const isAdd = i.kind === 'add';
  if (i.from && isAdd) throw invalidParameter('ADD --from is not supported; use COPY --from');
  const root = i.from ? await input.stageRoot(i.from) : input.ctx.root;

  const exclude = i.exclude;
  const inline: CopyPlan['inline'] = [];
  const patterns: string[] = [];
  for (const raw of i.sources) {
    const hd = heredocName(raw);
    const doc = hd !== undefined ? i.heredocs.find((h) => h.name === hd) : undefined;
    if (doc) {
      inline.push({ name: doc.name, content: Buffer.from(doc.content) });
      continue;
    }
    const src = raw;
    if (isAdd && isUrl(src)) {
      const f = await copy.fetchAddUrl(src, input.signal, i.checksum, i.dest);
      inline.push({ name: f.name, content: f.content, ...(f.mtime ? { mtime: f.mtime } : {}), mode: 0o600 });
      continue;
    }
    if (!isAdd && isUrl(src)) throw invalidParameter("source can't be a URL for COPY");
    patterns.push(src);
  }
  const sources: CopySource[] = patterns.length
    ? await copy.resolveSources(root, patterns, { exclude, instruction: isAdd ? 'ADD' : 'COPY' })
    : [];
  const known = i.from ? undefined : input.ctx.digests;
  const sum = await copy.checksum(sources, inline, exclude, known);

  const rawDest = i.dest;
  let dest = posix.isAbsolute(rawDest) ? rawDest : posix.join(state.config.WorkingDir || '/', rawDest);
  if (rawDest.endsWith('/') && !dest.endsWith('/')) dest += '/';
  copy.checkDestination(isAdd ? 'ADD' : 'COPY', sources.length + inline.length, rawDest);
  const keyed = [sum, i.chown ?? '', i.chmod ?? '', i.parents ? 'parents' : '', i.link ? 'link' : ''].join(
    '|',
  );
  const shell = shellOf(state.config);
  const cmd = nopArgv(input.dockerfile.copyHistory(i.kind, sum, dest, shell), shell, true);
  if (await hooks.cached(cmd, keyed)) return;
  // the copy reads the files: the context's held contents are written out first
  if (!i.from) await input.ctx.contents();

  const ws = await hooks.workspace();
  try {
    await copyInto(ws, input, { sources, inline, dest, cmd, keyed });
  } finally {
    await ws.release();
  }
}

async function copyInto(
  ws: CopyWorkspace,
  input: CopyStepInput,
  c: { sources: CopySource[]; inline: CopyPlan['inline']; dest: string; cmd: string[]; keyed: string },
): Promise<void> {
  const { instruction: i, state, copy } = input;
  const { sources, inline, dest, cmd, keyed } = c;
  const isAdd = i.kind === 'add';
  const count = sources.length + inline.length;
  const destIsDir = dest.endsWith('/') || count > 1 || i.parents || (await ws.kindOf(dest)) === 'dir';
  let uid = 0;
  let gid = 0;
  if (i.chown) {
    ({ uid, gid } = await copy.resolveChown(i.chown, await input.roots.root(state.chainId)));
  }
  // the deepest directory on dest's path that exists: the copy makes those below it only
  let existingDir = destIsDir ? dest.replace(/\/+$/, '') || '/' : posix.dirname(dest);
  while (existingDir !== '/' && (await ws.kindOf(existingDir)) !== 'dir') {
    existingDir = posix.dirname(existingDir);
  }
  const plan: CopyPlan = {
    sources,
    inline,
    dest: dest.length > 1 ? dest.replace(/\/+$/, '') : dest,
    destIsDir,
    uid,
    gid,
    ...(i.chmod ? { mode: parseChmod(i.chmod) } : {}),
    parents: i.parents,
    extractArchives: isAdd,
    existingDir,
    ...(i.exclude.length ? { exclude: i.exclude } : {}),
  };
  await ws.write(copy.makeCopyTar(plan));
  await ws.commit(cmd, keyed);
}
