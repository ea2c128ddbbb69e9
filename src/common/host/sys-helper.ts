import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';

/**
 * The engine's side of berth-sys (native/berth-sys.c): one long-lived helper process that makes
 * mount(2), umount2(2), network namespaces and detached spawns for the engine, so a container's
 * start and removal run no mount/umount/unshare/bash process per call. Started on first use,
 * started again on the next call after it died; requests in flight when it dies fail with a clear
 * error (never hang). See docs/runtime.md (Host calls).
 */

const OP = {
  mount: 1,
  umount: 2,
  netns: 3,
  spawn: 4,
  write: 5,
  close: 6,
  exec: 7,
  sealed: 8,
  run: 9,
} as const;
const EV = { result: 128, data: 129, eof: 130, exit: 131 } as const;

/** A failed system call: `code` is the errno's name (EBUSY, EINVAL, ...). */
export class SysCallError extends Error {
  constructor(
    message: string,
    readonly errno: number,
    readonly code: string,
  ) {
    super(message);
  }
}

const errnoNames = new Map<number, string>(
  Object.entries(osConstants.errno).map(([name, n]) => [n as number, name]),
);

/** A process the helper started (in its own session): its pipes, its exit. */
export interface SysChild {
  readonly pid: number;
  /** What the child wrote on one of its `w` descriptors; `null` at its end. */
  onData(fd: number, listener: (chunk: Buffer | null) => void): void;
  /** The wait status (as waitpid gives it), or null when the helper died first. */
  readonly exited: Promise<number | null>;
  /**
   * Write to one of its `r` descriptors; resolves once the pipe took all of it (the helper keeps
   * what a full pipe cannot take and answers when the child read it: one write at a time per pipe).
   */
  write(fd: number, data: Buffer | string): Promise<void>;
  /** Close the helper's end of one descriptor (after a write under way), or of all. */
  close(fd?: number): void;
}

export interface SpawnRequest {
  file: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** One letter per child descriptor from 0: `n` /dev/null, `w` the child writes, `r` it reads. */
  fds: string;
}

/** The files of an exec shim (see `execShim`). */
export interface ExecShimFiles {
  pidFile: string;
  /** Removed by the shim once the runtime started the process. */
  cleanup?: string[];
  /** Where the shim writes `spec` (the process's JSON) before it runs the runtime. */
  specFile: string;
  spec: string;
}

interface Pending {
  resolve(value: number): void;
  reject(err: Error): void;
}

interface ChildState {
  listeners: Map<number, (chunk: Buffer | null) => void>;
  buffered: Map<number, (Buffer | null)[]>;
  /** The `w` descriptors not at their end yet (a daemon keeps them after its first process exits). */
  open: Set<number>;
  exited: boolean;
  exit(status: number | null): void;
  /** Forget it once it exited and nothing more can come. */
  settle(): void;
}

/** Where `npm run build` puts it: the checkout's dist/native/, from src/ and from dist/ alike. */
export const sysHelperPath = fileURLToPath(new URL('../../../dist/native/berth-sys', import.meta.url));

export class SysHelper {
  private child: ChildProcess | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly children = new Map<number, ChildState>();
  private inbuf: Buffer = Buffer.alloc(0);

  /** `timeoutMs`: how long a request may wait for its answer before the helper is killed. */
  constructor(
    readonly path: string,
    private readonly timeoutMs = 60_000,
  ) {}

  /** The helper process, while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(this.path, [], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.child = child;
    child.stdin?.on('error', () => undefined);
    child.stdout?.on('data', (chunk: Buffer) => this.receive(chunk));
    const gone = (why: string) => {
      if (this.child !== child) return;
      this.child = null;
      this.inbuf = Buffer.alloc(0);
      const err = new Error(`the berth-sys helper ${why}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      for (const c of this.children.values()) {
        for (const l of c.listeners.values()) l(null);
        c.exit(null);
      }
      this.children.clear();
    };
    child.on('error', (e) => gone(`could not run: ${e.message}`));
    child.on('exit', (code, signal) => gone(`exited (${signal ?? code})`));
    this.idle();
    return child;
  }

  /** The helper keeps the engine's event loop alive only while something waits on it. */
  private idle(): void {
    const c = this.child;
    if (!c) return;
    const busy = this.pending.size > 0 || this.children.size > 0;
    const out = c.stdout as unknown as { ref(): void; unref(): void } | null;
    if (busy) {
      c.ref();
      out?.ref();
    } else {
      c.unref();
      out?.unref();
    }
  }

  private receive(chunk: Buffer): void {
    this.inbuf = this.inbuf.length ? Buffer.concat([this.inbuf, chunk]) : chunk;
    let off = 0;
    while (this.inbuf.length - off >= 9) {
      const len = this.inbuf.readUInt32LE(off);
      if (this.inbuf.length - off - 4 < len) break;
      const id = this.inbuf.readUInt32LE(off + 4);
      const op = this.inbuf[off + 8];
      const payload = this.inbuf.subarray(off + 9, off + 4 + len);
      off += 4 + len;
      this.dispatch(id, op ?? 0, payload);
    }
    this.inbuf = off === this.inbuf.length ? Buffer.alloc(0) : Buffer.from(this.inbuf.subarray(off));
    this.idle();
  }

  private dispatch(id: number, op: number, payload: Buffer): void {
    if (op === EV.result) {
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      const value = payload.readInt32LE(0);
      if (value >= 0) p.resolve(value);
      else {
        const errno = -value;
        const code = errnoNames.get(errno) ?? `E${errno}`;
        p.reject(new SysCallError(payload.subarray(4).toString('utf8'), errno, code));
      }
      return;
    }
    const c = this.children.get(id);
    if (!c) return;
    if (op === EV.exit) {
      c.exit(payload.readInt32LE(0));
      return;
    }
    const fd = payload[0] ?? 0;
    const chunk = op === EV.data ? Buffer.from(payload.subarray(1)) : null;
    const l = c.listeners.get(fd);
    if (l) l(chunk);
    else {
      const b = c.buffered.get(fd) ?? [];
      b.push(chunk);
      c.buffered.set(fd, b);
    }
    if (chunk === null) {
      c.open.delete(fd);
      c.settle();
    }
  }

  private request(op: number, parts: (string | Buffer)[]): { id: number; done: Promise<number> } {
    const child = this.ensure();
    const id = this.nextId++;
    if (this.nextId > 0x7fffffff) this.nextId = 1;
    const body = Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(`${p}\0`, 'utf8') : p)));
    const head = Buffer.alloc(9);
    head.writeUInt32LE(5 + body.length, 0);
    head.writeUInt32LE(id, 4);
    head[8] = op;
    const done = new Promise<number>((resolve, reject) => {
      // a helper stuck in the kernel (a mount that never returns) is killed: what waited on it
      // fails as when it died, and the next request has a new one
      const timer = setTimeout(() => {
        if (this.child === child) child.kill('SIGKILL');
      }, this.timeoutMs);
      timer.unref();
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
    this.idle();
    child.stdin?.write(Buffer.concat([head, body]));
    return { id, done };
  }

  async mount(o: {
    source: string;
    fstype: string;
    target: string;
    data?: string;
    cwd?: string;
    flags?: number;
  }): Promise<void> {
    await this.request(OP.mount, [
      o.source,
      o.fstype,
      o.target,
      o.data ?? '',
      o.cwd ?? '',
      String(o.flags ?? 0),
    ]).done;
  }

  /** umount2(2); `detach` = MNT_DETACH. */
  async umount(target: string, detach = false): Promise<void> {
    await this.request(OP.umount, [target, String(detach ? 2 : 0)]).done;
  }

  /** A new network namespace with `lo` up, bound on the (existing) file at `path`. */
  async netns(path: string): Promise<void> {
    await this.request(OP.netns, [path]).done;
  }

  async spawn(r: SpawnRequest): Promise<SysChild> {
    return this.startChild(OP.spawn, [], r);
  }

  /**
   * The same as `spawn` with `file` (a runtime: runc, crun) run from the helper's sealed
   * in-memory copy of it, or from its path when no copy could be made (docs/runtime.md).
   */
  async spawnSealed(r: SpawnRequest): Promise<SysChild> {
    return this.startChild(OP.run, [], r);
  }

  /**
   * A path another program can exec to run the helper's sealed in-memory copy of `file` (made
   * now if there is none): `/proc/<helper pid>/fd/<n>`. Valid while this helper runs and the
   * file on disk stays the same; null when no copy can be made (then `file` is run as it is).
   */
  async sealedPath(file: string): Promise<string | null> {
    try {
      const { done } = this.request(OP.sealed, [file]);
      const pid = this.pid;
      const fd = await done;
      // an answer comes from the helper that was asked (one that died fails the request)
      return pid === undefined ? null : `/proc/${pid}/fd/${fd}`;
    } catch {
      return null;
    }
  }

  /**
   * An exec session without a monitor: the helper forks a shim (a child subreaper) that runs
   * `file args` (the runtime's `exec --detach --pid-file <pidFile> ...`) on descriptors 0-2 and
   * reports on descriptor 3 (`fds` has four letters, the fourth `w`) conmon's sync messages:
   * `{"data": pid}` or `{"data": -1}` when the runtime failed, then `{"data": exit code}`.
   * The shim first writes `spec` to `specFile` (the runtime's `--process`); it removes the pid
   * file once read, and the `cleanup` files once the runtime succeeded.
   * The child's pid is the shim's.
   */
  async execShim(r: SpawnRequest & ExecShimFiles): Promise<SysChild> {
    return this.startChild(OP.exec, [r.pidFile, (r.cleanup ?? []).join('\n'), r.specFile, r.spec], r);
  }

  private async startChild(op: number, prefix: string[], r: SpawnRequest): Promise<SysChild> {
    const env = Object.entries(r.env)
      .filter((e): e is [string, string] => e[1] !== undefined)
      .map(([k, v]) => `${k}=${v}`);
    const { id, done } = this.request(op, [
      ...prefix,
      r.fds,
      r.cwd ?? '',
      r.file,
      String(r.args.length + 1),
      r.file,
      ...r.args,
      String(env.length),
      ...env,
    ]);
    let exitResolve: (s: number | null) => void = () => undefined;
    const exited = new Promise<number | null>((res) => {
      exitResolve = res;
    });
    const state: ChildState = {
      listeners: new Map(),
      buffered: new Map(),
      open: new Set([...r.fds].flatMap((k, fd) => (k === 'w' ? [fd] : []))),
      exited: false,
      exit: (s) => {
        state.exited = true;
        exitResolve(s);
        state.settle();
      },
      settle: () => {
        if (!state.exited || state.open.size > 0) return;
        if (this.children.get(id) === state) this.children.delete(id);
        this.idle();
      },
    };
    // events may follow the answer in the same read: registered before it arrives
    this.children.set(id, state);
    let pid: number;
    try {
      pid = await done;
    } catch (err) {
      // A child whose exec failed has no pipes, and its EXIT event may have come before this
      // answer: settle now (or when it comes), else the helper stays busy and keeps the process
      // alive for good.
      state.open.clear();
      state.settle();
      throw err;
    }
    return {
      pid,
      exited,
      onData: (fd, listener) => {
        state.listeners.set(fd, listener);
        for (const chunk of state.buffered.get(fd) ?? []) listener(chunk);
        state.buffered.delete(fd);
      },
      write: async (fd, data) => {
        const h = Buffer.alloc(5);
        h.writeUInt32LE(id, 0);
        h[4] = fd;
        await this.request(OP.write, [h, typeof data === 'string' ? Buffer.from(data) : data]).done;
      },
      close: (fd) => {
        if (fd === undefined) state.open.clear();
        else state.open.delete(fd);
        state.settle();
        if (!this.child) return;
        const h = Buffer.alloc(5);
        h.writeUInt32LE(id, 0);
        h[4] = fd ?? 255;
        this.request(OP.close, [h]).done.catch(() => undefined);
      },
    };
  }

  /** Stop the helper (tests); children it started live on. */
  stop(): void {
    this.child?.stdin?.end();
  }
}

let shared: SysHelper | null | undefined;

/** The process's helper, or null when it was not built (a dev tree without `npm run build`). */
export function sysHelper(): SysHelper | null {
  if (shared !== undefined) return shared;
  try {
    accessSync(sysHelperPath, constants.X_OK);
    shared = new SysHelper(sysHelperPath);
  } catch {
    shared = null;
  }
  return shared;
}
