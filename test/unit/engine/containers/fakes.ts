import { EventEmitter } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { notFound } from '../../../../src/common/errors.js';
import { Logger } from '../../../../src/common/log.js';
import { createContainerService } from '../../../../src/engine/containers/containers.service.js';
import type { ContainerService } from '../../../../src/engine/containers/service.types.js';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import type { ImageRecord, ImageResolver, ImageUsers } from '../../../../src/engine/images/images.types.js';
import type {
  AttachConnection,
  ContainerStats,
  ExitStatus,
  OciResources,
  Runtime,
  RuntimeState,
  StartOptions,
} from '../../../../src/engine/runtime/index.js';
import type { SnapshotPaths, Snapshotter } from '../../../../src/engine/storage/snapshotter.types.js';
import { createVolumeService } from '../../../../src/engine/volumes/volumes.service.js';
import { ociSpec } from '../../../helpers/oci.js';

export const IMAGE_ID = `sha256:${'a'.repeat(64)}`;

export function busyboxImage(): ImageRecord {
  return {
    id: IMAGE_ID,
    config: {
      architecture: process.arch === 'arm64' ? 'arm64' : 'amd64',
      os: 'linux',
      config: { Cmd: ['sh'], Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'] },
      rootfs: { type: 'layers', diff_ids: [] },
    },
    repoTags: ['busybox:latest'],
    repoDigests: [],
    chainId: `sha256:${'b'.repeat(64)}`,
    size: 1000,
    created: '2024-01-01T00:00:00Z',
    parent: '',
  };
}

export class FakeSnapshotter implements Snapshotter {
  readonly prepared = new Set<string>();
  readonly mounted = new Set<string>();
  async prepare(key: string): Promise<void> {
    this.prepared.add(key);
  }
  async mount(_key: string, target: string): Promise<void> {
    this.mounted.add(target);
  }
  async unmount(target: string): Promise<void> {
    this.mounted.delete(target);
  }
  async remove(key: string): Promise<void> {
    this.prepared.delete(key);
  }
  async usage(): Promise<number> {
    return 42;
  }
  async exists(key: string): Promise<boolean> {
    return this.prepared.has(key);
  }
  /** Where the fake's snapshots would be (the harness points it into its temp directory). */
  root = join(tmpdir(), 'berth-fake-snapshots');
  async paths(key: string): Promise<SnapshotPaths> {
    // as the overlay snapshotter: no paths for a snapshot that is not there
    if (!this.prepared.has(key)) throw notFound(`snapshot ${key} does not exist`);
    const d = join(this.root, key);
    return { MergedDir: join(d, 'merged'), UpperDir: join(d, 'upper'), WorkDir: join(d, 'work') };
  }
}

export class FakeImages implements ImageResolver {
  readonly snapshotter = new FakeSnapshotter();
  users?: ImageUsers;
  images = [busyboxImage()];
  async resolve(ref: string): Promise<ImageRecord> {
    const img = this.images.find(
      (i) => i.repoTags.includes(ref.includes(':') ? ref : `${ref}:latest`) || i.id === ref,
    );
    if (!img) throw notFound(`No such image: ${ref}`);
    return img;
  }
  async get(id: string): Promise<ImageRecord | undefined> {
    return this.images.find((i) => i.id === id);
  }
  async list(): Promise<ImageRecord[]> {
    return this.images;
  }
  setUsers(users: ImageUsers): void {
    this.users = users;
  }
}

export class FakeConn extends EventEmitter implements AttachConnection {
  stdin: Buffer[] = [];
  stdinClosed = false;
  closed = false;
  writeStdin(chunk: Buffer): void {
    this.stdin.push(chunk);
  }
  closeStdin(): void {
    this.stdinClosed = true;
  }
  close(): void {
    this.closed = true;
    this.emit('close');
  }
}

interface Proc {
  pid: number;
  status: RuntimeState['status'];
  exit?: ExitStatus;
  conn?: FakeConn;
  opts: StartOptions;
}

/** A runtime that runs nothing: tests decide when containers exit. */
export class FakeRuntime implements Runtime {
  readonly name = 'runc';
  readonly path = '/usr/sbin/runc';
  readonly events = new EventEmitter();
  procs = new Map<string, Proc>();
  signals: Array<[string, number]> = [];
  /** Signals after which the fake process exits (code 128+signal). */
  fatal = new Set([9, 15]);
  failStart?: string;
  private nextPid = 1000;

  async version(): Promise<string> {
    return '1.1.5';
  }
  async start(opts: StartOptions): Promise<{ pid: number }> {
    if (this.failStart) throw new Error(this.failStart);
    const proc: Proc = { pid: this.nextPid++, status: 'created', opts };
    this.procs.set(opts.id, proc);
    if (opts.beforeStart) await opts.beforeStart();
    proc.status = 'running';
    return { pid: proc.pid };
  }
  /** Make the container's process end. */
  exit(id: string, exitCode: number, opts: { silent?: boolean } = {}): void {
    const p = this.procs.get(id);
    if (!p || p.status === 'stopped') return;
    p.status = 'stopped';
    p.exit = { exitCode, oomKilled: false, finishedAt: new Date() };
    p.conn?.close();
    if (!opts.silent) setImmediate(() => this.events.emit('exit', id, p.exit));
  }
  output(id: string, stream: 'stdout' | 'stderr', text: string): void {
    this.procs.get(id)?.conn?.emit(stream, Buffer.from(text));
  }
  async signal(id: string, signal: number): Promise<void> {
    this.signals.push([id, signal]);
    if (this.fatal.has(signal)) this.exit(id, 128 + signal);
  }
  async pause(id: string): Promise<void> {
    const p = this.procs.get(id);
    if (p) p.status = 'paused';
  }
  async resume(id: string): Promise<void> {
    const p = this.procs.get(id);
    if (p && p.status === 'paused') p.status = 'running';
  }
  async state(id: string): Promise<RuntimeState | null> {
    const p = this.procs.get(id);
    return p ? { status: p.status, pid: p.pid } : null;
  }
  async exitStatus(id: string): Promise<ExitStatus | null> {
    return this.procs.get(id)?.exit ?? null;
  }
  async delete(id: string): Promise<void> {
    const p = this.procs.get(id);
    if (p && p.status === 'stopped') this.procs.delete(id);
  }
  async attach(id: string): Promise<AttachConnection> {
    const p = this.procs.get(id);
    if (!p) throw notFound(`No such container: ${id}`);
    const conn = new FakeConn();
    p.conn = conn;
    return conn;
  }
  /** Exit code of the next exec processes (health probes). */
  execExitCode = 0;
  execs: string[][] = [];
  async exec(opts: {
    id: string;
    execId: string;
    config: { Cmd: string[] };
    beforeStart?: () => Promise<void>;
  }) {
    this.execs.push(opts.config.Cmd);
    const conn = new FakeConn();
    this.execConns.set(opts.execId, conn);
    if (opts.beforeStart) await opts.beforeStart();
    conn.emit('stdout', Buffer.from('probe-out'));
    return { pid: 1, exited: Promise.resolve({ exitCode: this.execExitCode }) };
  }
  execConns = new Map<string, FakeConn>();
  async attachExec(execId: string): Promise<AttachConnection> {
    return this.execConns.get(execId) ?? new FakeConn();
  }
  async resizeExec(): Promise<void> {}
  resizes: Array<[string, number, number]> = [];
  async resize(id: string, h: number, w: number): Promise<void> {
    this.resizes.push([id, h, w]);
  }
  /** Where a monitor would write its output (the fake writes nothing; tests may). */
  monitorDir = join(tmpdir(), 'berth-fake-runtime');
  monitorLogPath(id: string): string {
    return join(this.monitorDir, id, 'output.log');
  }
  async reopenLog(): Promise<void> {}
  async pids(id: string): Promise<number[]> {
    const p = this.procs.get(id);
    return p ? [p.pid] : [];
  }
  /** `runtime update` calls: the container and the resources. */
  updates: Array<[string, OciResources]> = [];
  async stats(): Promise<ContainerStats | null> {
    return null;
  }
  async update(id: string, resources: OciResources): Promise<void> {
    this.updates.push([id, resources]);
  }
  async close(): Promise<void> {}
}

export interface Harness {
  dir: string;
  service: ContainerService;
  runtime: FakeRuntime;
  images: FakeImages;
  events: EventsService;
  /** Container events as "action" or "action:attr=value" strings. */
  seen: string[];
  restart(): Promise<void>;
  cleanup(): Promise<void>;
}

/** With `volumes`, the containers get a real local volume service (under the harness's dir). */
export async function harness(opts: { volumes?: boolean } = {}): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-containers-'));
  const runtime = new FakeRuntime();
  runtime.monitorDir = join(dir, 'monitor');
  const images = new FakeImages();
  images.snapshotter.root = join(dir, 'snapshots');
  const events = new EventsService();
  const seen: string[] = [];
  events.subscribe((e) => {
    if (e.Type === 'container') seen.push(e.Action);
  });
  const log = new Logger('error');
  const make = async () =>
    createContainerService({
      dataRoot: join(dir, 'data'),
      execRoot: join(dir, 'exec'),
      events,
      images,
      snapshots: images.snapshotter,
      runtime,
      ...(opts.volumes
        ? { volumes: await createVolumeService({ dataRoot: join(dir, 'data'), events, log }) }
        : {}),
      log,
      helpers: {
        buildSpec: async (input) =>
          ociSpec({ process: { args: [...(input.config.Entrypoint ?? []), ...(input.config.Cmd ?? [])] } }),
        readLogs: async function* () {},
      },
    });
  const h: Harness = {
    dir,
    service: await make(),
    runtime,
    images,
    events,
    seen,
    async restart() {
      await h.service.close();
      h.service = await make();
    },
    async cleanup() {
      await h.service.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return h;
}
