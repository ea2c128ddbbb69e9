import { basename } from 'node:path';
import { conflict, notFound, systemError } from '../../../common/errors.js';
import type { RuntimeState } from '../runtime.types.js';
import type { ProcessRunner, RunResult } from './process.js';

const missing = /does not exist|no such file or directory|not found/i;

/**
 * The message of what a runtime wrote when it failed, without its log framing: runc's logfmt lines
 * (`time="…" level=error msg="runc create failed: …"`, the last error line, quotes unescaped),
 * crun's JSON log lines (`{"msg": …}`), or the text as it is.
 */
export function runtimeMessage(raw: string): string {
  const lines = raw
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '');
  const messages = lines.map((line) => {
    const logfmt = /(?:^|\s)level=(\w+)\s+msg=("(?:[^"\\]|\\.)*"|\S+)/.exec(line);
    if (logfmt) {
      const text = logfmt[2] ?? '';
      const msg = text.startsWith('"') ? (JSON.parse(text) as string) : text;
      return { level: logfmt[1] ?? '', msg };
    }
    try {
      const j = JSON.parse(line) as { msg?: unknown; level?: unknown };
      if (typeof j.msg === 'string') return { level: String(j.level ?? 'error'), msg: j.msg };
    } catch {
      // not JSON
    }
    return { level: 'error', msg: line.trim() };
  });
  const errors = messages.filter((m) => m.level === 'error' || m.level === 'fatal');
  return (errors.at(-1) ?? messages.at(-1))?.msg ?? '';
}

/**
 * crun's words for a process it could not start, in runc's (what dockerd shows, and what clients
 * read: the docker CLI exits 127 for "executable file not found" / "no such file or directory"
 * and 126 for "permission denied", case-sensitive). Other messages are kept as crun wrote them.
 */
export function runcStyleMessage(msg: string, arg0 = ''): string {
  const q = (s: string) => JSON.stringify(s);
  const lower = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
  const notFound = /^executable file `(.*)` not found in \$PATH: No such file or directory$/.exec(msg);
  if (notFound) {
    const file = notFound[1] ?? '';
    return file.includes('/')
      ? `unable to start container process: exec: ${q(file)}: stat ${file}: no such file or directory`
      : `unable to start container process: exec: ${q(file)}: executable file not found in $PATH`;
  }
  const chdir = /^chdir `(.*)`: (.+)$/.exec(msg);
  if (chdir) {
    return `unable to start container process: chdir to cwd (${q(chdir[1] ?? '')}) set in config.json failed: ${lower(chdir[2] ?? '')}`;
  }
  const write = /^(.*)writing file `(.+)`: (.+)$/.exec(msg);
  if (write) return `${write[1]}failed to write ${write[2]}: ${lower(write[3] ?? '')}`;
  const open = /^open executable: (.+)$/.exec(msg);
  if (open) return `unable to start container process: exec: ${q(arg0)}: ${lower(open[1] ?? '')}`;
  return msg;
}

/** The OCI runtime's command line (runc and crun take the same verbs). */
export class OciCli {
  constructor(
    readonly path: string,
    readonly root: string,
    private readonly runner: ProcessRunner,
  ) {}

  /** Arguments conmon passes to the runtime before `create`. */
  globalArgs(): string[] {
    return [`--root=${this.root}`];
  }

  /** A runtime call, from berth-sys's sealed copy of the binary when there is one. */
  private async exec(args: string[]): Promise<RunResult> {
    return this.runner.run(this.path, [...this.globalArgs(), ...args], { sealed: true });
  }

  /**
   * What conmon's `-r` should exec: berth-sys's sealed copy (`/proc/<pid>/fd/<n>`, valid while
   * the helper runs; asked again for every monitor), else the binary's path. Never rejects.
   */
  async monitorPath(): Promise<string> {
    try {
      return (await this.runner.runtimePath?.(this.path)) ?? this.path;
    } catch {
      return this.path;
    }
  }

  private fail(id: string, verb: string, r: RunResult): never {
    const raw = runtimeMessage(r.stderr || r.stdout);
    const msg = basename(this.path) === 'crun' ? runcStyleMessage(raw) : raw;
    if (missing.test(msg)) throw notFound(`No such container: ${id}`);
    if (/not running|not paused|already paused|is paused|cannot .* (stopped|paused)|stopped/i.test(msg)) {
      throw conflict(`container ${id}: ${msg}`);
    }
    throw systemError(`${verb} ${id}: ${msg || `exit ${r.code}`}`);
  }

  async version(): Promise<string> {
    const r = await this.runner.run(this.path, ['--version']);
    const m = /version\s+(\S+)/.exec(r.stdout);
    return m ? m[1]! : r.stdout.split('\n')[0]!.trim();
  }

  async start(id: string): Promise<void> {
    const r = await this.exec(['start', id]);
    if (r.code !== 0) this.fail(id, 'start', r);
  }

  async kill(id: string, signal: number): Promise<void> {
    const r = await this.exec(['kill', id, String(signal)]);
    if (r.code !== 0) this.fail(id, 'kill', r);
  }

  async pause(id: string): Promise<void> {
    const r = await this.exec(['pause', id]);
    if (r.code !== 0) this.fail(id, 'pause', r);
  }

  async resume(id: string): Promise<void> {
    const r = await this.exec(['resume', id]);
    if (r.code !== 0) this.fail(id, 'resume', r);
  }

  async state(id: string): Promise<RuntimeState | null> {
    const r = await this.exec(['state', id]);
    if (r.code !== 0) {
      if (missing.test(r.stderr)) return null;
      this.fail(id, 'state', r);
    }
    const s = JSON.parse(r.stdout) as { status?: string; pid?: number };
    const status =
      s.status === 'created' || s.status === 'running' || s.status === 'paused' ? s.status : 'stopped';
    return { status, pid: status === 'stopped' ? 0 : (s.pid ?? 0) };
  }

  async update(id: string, resourcesFile: string): Promise<void> {
    const r = await this.exec(['update', '--resources', resourcesFile, id]);
    if (r.code !== 0) this.fail(id, 'update', r);
  }

  async delete(id: string): Promise<void> {
    const r = await this.exec(['delete', '--force', id]);
    if (r.code !== 0 && !missing.test(r.stderr)) this.fail(id, 'delete', r);
  }

  async ps(id: string): Promise<number[]> {
    const r = await this.exec(['ps', '--format', 'json', id]);
    if (r.code !== 0) this.fail(id, 'ps', r);
    const out = JSON.parse(r.stdout.trim() || '[]') as unknown;
    return Array.isArray(out) ? out.map(Number) : [];
  }
}
