import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, constants } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileAtomic } from '../../../common/fs/atomic.js';
import { mkdir, readFile } from '../../../common/fs/quick.js';
import type { OciSeccomp, OciSyscall } from '../oci/spec.types.js';

/**
 * Seccomp filters compiled once: crun compiles a container's `linux.seccomp` with libseccomp at
 * every create (~20 ms for Docker's default profile), unless the spec carries the compiled program
 * in the `run.oci.seccomp_bpf_data` annotation. The driver compiles each distinct filter once with
 * berth-seccomp-bpf (native/seccomp-bpf.c: the libseccomp calls crun makes) and keeps the program
 * by the filter's digest.
 */
export const seccompBpfAnnotation = 'run.oci.seccomp_bpf_data';

/** Compiles the helper's line program (see native/seccomp-bpf.c) to BPF. Tests may substitute it. */
export type SeccompCompiler = (program: string) => Promise<Buffer>;

const EPERM = 1;
/** libseccomp's SCMP_CMP_* values by the OCI operator names. */
const operators: Record<string, number> = {
  SCMP_CMP_NE: 1,
  SCMP_CMP_LT: 2,
  SCMP_CMP_LE: 3,
  SCMP_CMP_EQ: 4,
  SCMP_CMP_GE: 5,
  SCMP_CMP_GT: 6,
  SCMP_CMP_MASKED_EQ: 7,
};

/** libseccomp's SCMP_ACT_* value for an OCI action, as crun's get_seccomp_action; null if unknown. */
function actionValue(action: string, errnoRet: number | undefined): number | null {
  const withErrno = action === 'SCMP_ACT_ERRNO' || action === 'SCMP_ACT_TRACE';
  if (errnoRet !== undefined && !withErrno) return null; // crun refuses it: let crun say so
  const data = (errnoRet ?? EPERM) & 0xffff;
  switch (action) {
    case 'SCMP_ACT_ALLOW':
      return 0x7fff0000;
    case 'SCMP_ACT_ERRNO':
      return (0x00050000 | data) >>> 0;
    case 'SCMP_ACT_KILL':
    case 'SCMP_ACT_KILL_THREAD':
      return 0;
    case 'SCMP_ACT_KILL_PROCESS':
      return 0x80000000;
    case 'SCMP_ACT_LOG':
      return 0x7ffc0000;
    case 'SCMP_ACT_TRAP':
      return 0x00030000;
    case 'SCMP_ACT_TRACE':
      return (0x7ff00000 | data) >>> 0;
    default:
      // SCMP_ACT_NOTIFY needs crun's listener handling; anything else is an error crun reports
      return null;
  }
}

const uint = (v: number | undefined, max: number): string | null =>
  v === undefined ? '0' : Number.isSafeInteger(v) && v >= 0 && v <= max ? String(v) : null;

function ruleLines(call: OciSyscall, action: number): string[] | null {
  // crun uses at most 6 arguments; a repeated index turns each into a rule of its own
  const args = (call.args ?? []).slice(0, 6);
  const cmps: string[] = [];
  const seen = new Set<number>();
  let repeated = false;
  for (const a of args) {
    const op = operators[a.op];
    const index = uint(a.index, 5);
    const value = uint(a.value, Number.MAX_SAFE_INTEGER);
    const valueTwo = uint(a.valueTwo, Number.MAX_SAFE_INTEGER);
    if (op === undefined || index === null || value === null || valueTwo === null) return null;
    if (seen.has(a.index)) repeated = true;
    seen.add(a.index);
    cmps.push(`${index} ${op} ${value} ${valueTwo}`);
  }
  const lines: string[] = [];
  for (const name of call.names) {
    if (!/^[a-z0-9_]{1,100}$/.test(name)) return null;
    if (repeated) for (const c of cmps) lines.push(`rule ${action} ${name} 1 ${c}`);
    else lines.push(`rule ${action} ${name} ${cmps.length}${cmps.map((c) => ` ${c}`).join('')}`);
  }
  return lines;
}

/**
 * The helper's program for a filter, as crun builds it (libcrun_generate_seccomp): the default
 * action, the architectures, a rule per syscall name unless its action is the default one. Null
 * when crun should see the filter itself (an action or operator it handles specially or refuses).
 */
export function seccompProgram(seccomp: OciSeccomp): string | null {
  const def = actionValue(seccomp.defaultAction, seccomp.defaultErrnoRet);
  if (def === null) return null;
  const lines = [`default ${def}`];
  for (const a of seccomp.architectures ?? []) {
    const name = a.replace(/^SCMP_ARCH_/, '').toLowerCase();
    if (!/^[a-z0-9_]{1,31}$/.test(name)) return null;
    lines.push(`arch ${name}`);
  }
  for (const call of seccomp.syscalls ?? []) {
    const action = actionValue(call.action, call.errnoRet);
    if (action === null) return null;
    if (action === def) continue;
    const rules = ruleLines(call, action);
    if (rules === null) return null;
    lines.push(...rules);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Where `npm run build` puts the helper (scripts/build-native.sh): the checkout's dist/native/, the
 * same path from this module in dist/ and in src/ (tests run the sources).
 */
export const seccompHelperPath = fileURLToPath(
  new URL('../../../../dist/native/berth-seccomp-bpf', import.meta.url),
);

/** The helper as a compiler, or null when it was not built (no gcc or libseccomp-dev). */
export async function helperCompiler(path = seccompHelperPath): Promise<SeccompCompiler | null> {
  try {
    await access(path, constants.X_OK);
  } catch {
    return null;
  }
  return (program) =>
    new Promise((resolve, reject) => {
      const child = spawn(path, [], { stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (b: Buffer) => out.push(b));
      child.stderr.on('data', (b: Buffer) => err.push(b));
      child.stdin.on('error', () => undefined); // an early exit is reported below
      child.on('error', reject);
      child.on('close', (code) => {
        if (code === 0) resolve(Buffer.concat(out));
        else reject(new Error(Buffer.concat(err).toString('utf8').trim() || `${path} exited with ${code}`));
      });
      child.stdin.end(program);
    });
}

/**
 * Where compiled filters are kept across engine restarts: `<dir>/<key>.bpf`, the key the sha256 of
 * the filter's program and of `salt` (what else the program depends on: the architecture, the
 * runtime's version, the compiler). Each file is the program followed by its sha256, so a torn or
 * altered file is seen and compiled again, never handed to the runtime.
 */
export interface SeccompDiskCache {
  dir: string;
  /** Asked once, when the first filter is looked up. */
  salt: () => Promise<string>;
}

const DIGEST_BYTES = 32;

/** A filter file's program, or null when the file is not one this cache wrote whole. */
export function readBpfFile(file: Buffer): Buffer | null {
  const size = file.length - DIGEST_BYTES;
  if (size <= 0 || size % 8 !== 0) return null;
  const program = file.subarray(0, size);
  const digest = createHash('sha256').update(program).digest();
  return digest.equals(file.subarray(size)) ? program : null;
}

export function bpfFileContent(program: Buffer): Buffer {
  return Buffer.concat([program, createHash('sha256').update(program).digest()]);
}

const validProgram = (bpf: Buffer): boolean => bpf.length > 0 && bpf.length % 8 === 0;

/**
 * Compiled filters by digest: each distinct filter is compiled once per engine process, and with a
 * disk cache once per data root (an engine restart reads the file).
 */
export class SeccompBpfCache {
  private readonly programs = new Map<string, Promise<string | null>>();
  /** By the section itself: a shared one (Docker's default profile) is not turned into text again. */
  private readonly bySection = new WeakMap<OciSeccomp, Promise<string | null>>();
  private salt: Promise<string> | undefined;

  constructor(
    private readonly compile: SeccompCompiler,
    private readonly onError: (err: unknown) => void = () => undefined,
    private readonly disk?: SeccompDiskCache,
  ) {}

  /** The filter's BPF program, base64 (the annotation's value); null to let the runtime compile it. */
  bpf(seccomp: OciSeccomp): Promise<string | null> {
    let known = this.bySection.get(seccomp);
    if (!known) {
      known = this.lookup(seccomp);
      this.bySection.set(seccomp, known);
    }
    return known;
  }

  private lookup(seccomp: OciSeccomp): Promise<string | null> {
    const program = seccompProgram(seccomp);
    if (program === null) return Promise.resolve(null);
    const digest = createHash('sha256').update(program).digest('hex');
    let compiled = this.programs.get(digest);
    if (!compiled) {
      compiled = this.load(program).then(
        (bpf) => (bpf ? bpf.toString('base64') : null),
        (err: unknown) => {
          this.onError(err);
          return null;
        },
      );
      this.programs.set(digest, compiled);
    }
    return compiled;
  }

  /** The program from the disk cache when it holds it whole, else compiled (and stored). */
  private async load(program: string): Promise<Buffer | null> {
    if (!this.disk) {
      const bpf = await this.compile(program);
      return validProgram(bpf) ? bpf : null;
    }
    this.salt ??= this.disk.salt();
    const key = createHash('sha256')
      .update(await this.salt)
      .update('\0')
      .update(program)
      .digest('hex');
    const path = join(this.disk.dir, `${key}.bpf`);
    const cached = await readFile(path).then(readBpfFile, () => null);
    if (cached) return cached;
    const bpf = await this.compile(program);
    if (!validProgram(bpf)) return null;
    // a cache: no fsync (a file lost to a power loss is compiled again; a torn one is refused above)
    await mkdir(this.disk.dir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(path, bpfFileContent(bpf), 0o600, 'none').catch(this.onError);
    return bpf;
  }

  get size(): number {
    return this.programs.size;
  }
}

/**
 * What a compiled filter depends on besides its program, for the disk cache's keys: the
 * architecture, the runtime's version and the compiler's binary (its libseccomp).
 */
export async function seccompCacheSalt(
  runtimeVersion: () => Promise<string>,
  helperPath = seccompHelperPath,
): Promise<string> {
  const helper = await readFile(helperPath).then(
    (b) => createHash('sha256').update(b).digest('hex'),
    () => 'no-helper',
  );
  return `${process.arch}\n${await runtimeVersion()}\n${helper}`;
}
