import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { notFound } from '../../../src/common/errors.js';
import { Logger } from '../../../src/common/log.js';
import { createContainerService } from '../../../src/engine/containers/containers.service.js';
import type { CreateRequest } from '../../../src/engine/containers/core/create.js';
import type { AttachSink } from '../../../src/engine/containers/io/io.types.js';
import type { ContainerService } from '../../../src/engine/containers/service.types.js';
import { EventsService } from '../../../src/engine/events/events.service.js';
import type { ImageRecord, ImageResolver } from '../../../src/engine/images/images.types.js';
import { createRuntime } from '../../../src/engine/runtime/index.js';
import type { Runtime } from '../../../src/engine/runtime/runtime.types.js';
import type { SnapshotPaths, Snapshotter } from '../../../src/engine/storage/snapshotter.types.js';
import { CREATE_OPTIONS } from '../../helpers/create-options.js';
import { makeBusyboxRootfs } from './runtime-fixture.js';

/**
 * The containers service against the real runtime (runc under conmon) and a minimal overlay
 * snapshotter over a busybox rootfs, without the HTTP layer.
 */

const exec = promisify(execFile);

class DirSnapshotter implements Snapshotter {
  constructor(
    private readonly root: string,
    private readonly lower: string,
  ) {}
  async prepare(key: string): Promise<void> {
    await mkdir(join(this.root, key, 'upper'), { recursive: true });
    await mkdir(join(this.root, key, 'work'), { recursive: true });
  }
  async mount(key: string, target: string): Promise<void> {
    const d = join(this.root, key);
    await mkdir(target, { recursive: true });
    await exec('mount', [
      '-t',
      'overlay',
      'overlay',
      '-o',
      `lowerdir=${this.lower},upperdir=${d}/upper,workdir=${d}/work`,
      target,
    ]);
  }
  async unmount(target: string): Promise<void> {
    await exec('umount', [target]);
  }
  async remove(key: string): Promise<void> {
    await rm(join(this.root, key), { recursive: true, force: true });
  }
  async usage(): Promise<number> {
    return 0;
  }
  async paths(key: string): Promise<SnapshotPaths> {
    const d = join(this.root, key);
    return {
      LowerDir: this.lower,
      MergedDir: join(d, 'merged'),
      UpperDir: join(d, 'upper'),
      WorkDir: join(d, 'work'),
    };
  }
  async exists(key: string): Promise<boolean> {
    return existsSync(join(this.root, key));
  }
}

function images(snapshotter: Snapshotter): ImageResolver & { snapshotter: Snapshotter } {
  const img: ImageRecord = {
    id: `sha256:${'e'.repeat(64)}`,
    config: {
      architecture: process.arch === 'arm64' ? 'arm64' : 'amd64',
      os: 'linux',
      config: { Cmd: ['sh'], Env: ['PATH=/bin'] },
      rootfs: { type: 'layers', diff_ids: [] },
    },
    repoTags: ['busybox:latest'],
    repoDigests: [],
    chainId: null,
    size: 0,
    created: '2024-01-01T00:00:00Z',
    parent: '',
  };
  return {
    snapshotter,
    async resolve(ref) {
      if (ref === 'busybox' || ref === 'busybox:latest' || ref === img.id) return img;
      throw notFound(`No such image: ${ref}`);
    },
    async get(id) {
      return id === img.id ? img : undefined;
    },
    async list() {
      return [img];
    },
    setUsers() {},
  };
}

function req(config: CreateRequest['config'], extra: Partial<CreateRequest> = {}): CreateRequest {
  return {
    config,
    hostConfig: {},
    networkingConfig: {},
    options: CREATE_OPTIONS,
    ...extra,
  };
}

function collector(): AttachSink & { text(): string; ended: Promise<string> } {
  const chunks: Buffer[] = [];
  let done!: (r: string) => void;
  const ended = new Promise<string>((r) => {
    done = r;
  });
  return {
    output: (_s, d) => chunks.push(d),
    end: (reason) => done(reason),
    text: () => Buffer.concat(chunks).toString(),
    ended,
  };
}

describe('containers service with runc', () => {
  let dir: string;
  let runtime: Runtime;
  let service: ContainerService;
  let imgs: ReturnType<typeof images>;
  const events = new EventsService();
  const log = new Logger('warn');
  const make = async () => {
    runtime = await createRuntime({
      name: 'runc',
      execRoot: join(dir, 'exec'),
      dataRoot: join(dir, 'data'),
      log,
    });
    service = await createContainerService({
      dataRoot: join(dir, 'data'),
      execRoot: join(dir, 'exec'),
      events,
      images: imgs,
      snapshots: imgs.snapshotter,
      runtime,
      log,
    });
  };

  // The engine's HTTP server keeps its event loop alive; the runtime's watchers do not (unref'd).
  let keepAlive: NodeJS.Timeout;

  before(async () => {
    keepAlive = setInterval(() => undefined, 1000);
    dir = await mkdtemp(join(tmpdir(), 'berth-ctr-'));
    await makeBusyboxRootfs(join(dir, 'rootfs'));
    imgs = images(new DirSnapshotter(join(dir, 'snapshots'), join(dir, 'rootfs')));
    await make();
  });

  after(async () => {
    for (const c of await service.list({ all: true }))
      await service.remove(String(c.Id), { force: true }).catch(() => undefined);
    await service.close();
    await runtime.close();
    await rm(dir, { recursive: true, force: true });
    clearInterval(keepAlive);
  });

  it('attach before start sees the output of a fast echo; logs read it back', async () => {
    const { Id } = await service.create(
      req({ Image: 'busybox', Cmd: ['echo', 'hello'], AttachStdout: true }),
    );
    const sink = collector();
    const { begin } = await service.attach(Id, {
      stdin: false,
      stdout: true,
      stderr: true,
      stream: true,
      logs: false,
    });
    await begin(sink);
    const w = await service.wait(Id, 'next-exit');
    await service.start(Id);
    assert.equal((await w()).StatusCode, 0);
    assert.equal(await sink.ended, 'exited');
    assert.equal(sink.text(), 'hello\n');
    const { lines } = await service.logs(Id, {
      stdout: true,
      stderr: true,
      timestamps: false,
      follow: false,
      details: false,
    });
    const got: string[] = [];
    for await (const l of lines) got.push(`${l.stream}:${l.data.toString()}`);
    assert.deepEqual(got, ['stdout:hello\n']);
    await service.remove(Id, {});
  });

  it('stdin reaches the container and EOF ends it (StdinOnce)', async () => {
    const { Id } = await service.create(
      req({ Image: 'busybox', Cmd: ['cat'], OpenStdin: true, StdinOnce: true, AttachStdin: true }),
    );
    const sink = collector();
    const session = await (
      await service.attach(Id, { stdin: true, stdout: true, stderr: true, stream: true, logs: false })
    ).begin(sink);
    await service.start(Id);
    session.write(Buffer.from('ping\n'));
    session.endInput();
    assert.equal(await sink.ended, 'exited');
    assert.equal(sink.text(), 'ping\n');
    await service.remove(Id, {});
  });

  it('stop a sleeping container: SIGTERM ignored by sh as pid 1 → SIGKILL after t; exit 137', async () => {
    const { Id } = await service.create(req({ Image: 'busybox', Cmd: ['sleep', '60'] }));
    await service.start(Id);
    const view = await service.inspect(Id);
    assert.equal(view.State.Running, true);
    // right after the start the process may still be runc's init, about to exec the command
    let top = await service.top(Id);
    for (let i = 0; i < 50 && !top.Processes.some((p) => p.join(' ').includes('sleep 60')); i++) {
      await sleep(50);
      top = await service.top(Id);
    }
    assert.ok(
      top.Processes.some((p) => p.join(' ').includes('sleep 60')),
      JSON.stringify(top),
    );
    const hosts = await readFile(view.HostsPath as string, 'utf8');
    assert.match(hosts, /localhost/);
    const t0 = Date.now();
    await service.stop(Id, { timeout: 1 });
    assert.ok(Date.now() - t0 >= 900);
    const after = await service.inspect(Id);
    assert.equal(after.State.ExitCode, 137);
    await service.remove(Id, {});
  });

  it("announces events in dockerd's order: die before stop, stop within restart, unpause after a signal", async () => {
    const actions: string[] = [];
    const { Id } = await service.create(
      req({
        Image: 'busybox',
        // exits a while after SIGTERM: stop must still announce die first
        Cmd: ['sh', '-c', 'trap "sleep 0.3; exit 3" TERM; while :; do sleep 0.05; done'],
      }),
    );
    const off = events.subscribe((e) => {
      if (e.Actor.ID === Id)
        actions.push(e.Action === 'kill' ? `kill(${e.Actor.Attributes.signal})` : e.Action);
    });
    try {
      await service.start(Id);
      await service.stop(Id, { timeout: 5 });
      assert.deepEqual(actions.slice(-3), ['kill(15)', 'die', 'stop']);
      actions.length = 0;
      await service.start(Id);
      await service.restart(Id, { timeout: 5 });
      assert.deepEqual(actions, ['start', 'kill(15)', 'die', 'stop', 'start', 'restart']);
      actions.length = 0;
      await service.pause(Id);
      await service.kill(Id, 'HUP');
      assert.deepEqual(actions, ['pause', 'kill(1)', 'unpause']);
    } finally {
      off();
      await service.remove(Id, { force: true });
    }
  });

  it('kill of a paused container leaves it exited; kill of a restarting one ends its restart loop', async () => {
    const state = async (id: string) => (await service.inspect(id)).State;
    const { Id: paused } = await service.create(req({ Image: 'busybox', Cmd: ['sleep', '60'] }));
    await service.start(paused);
    await service.pause(paused);
    await service.kill(paused);
    let s = await state(paused);
    assert.deepEqual([s.Status, s.Running, s.Paused, s.ExitCode], ['exited', false, false, 137]);
    await service.remove(paused, {});

    const { Id: looping } = await service.create(
      req(
        { Image: 'busybox', Cmd: ['sh', '-c', 'exit 2'] },
        { hostConfig: { RestartPolicy: { Name: 'always' } } },
      ),
    );
    await service.start(looping);
    const deadline = Date.now() + 10_000;
    while (!(await state(looping)).Restarting && Date.now() < deadline) await sleep(20);
    assert.equal((await state(looping)).Restarting, true);
    await service.kill(looping);
    s = await state(looping);
    assert.deepEqual([s.Status, s.Running, s.Restarting], ['exited', false, false]);
    const restarts = (await service.inspect(looping)).RestartCount;
    await sleep(1500);
    assert.equal((await service.inspect(looping)).RestartCount, restarts, 'no restart after the kill');
    assert.equal((await state(looping)).Status, 'exited');
    await service.remove(looping, { force: true });
  });

  it('live restore across a new service and runtime instance', async () => {
    const { Id } = await service.create(
      req({ Image: 'busybox', Cmd: ['sleep', '60'] }, { name: 'survivor' }),
    );
    const { Id: quick } = await service.create(
      req({ Image: 'busybox', Cmd: ['sh', '-c', 'sleep 1; exit 5'] }, { name: 'quick' }),
    );
    await service.start(Id);
    await service.start(quick);
    await service.close();
    await runtime.close();
    await new Promise((r) => setTimeout(r, 1500));
    await make();
    const s = await service.inspect('survivor');
    assert.equal(s.State.Running, true);
    const q = await service.inspect('quick');
    assert.equal(q.State.Status, 'exited');
    assert.equal(q.State.ExitCode, 5);
    await service.stop('survivor', { timeout: 0 });
    await service.remove('survivor', {});
    await service.remove('quick', {});
  });
});
