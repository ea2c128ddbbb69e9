import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isKind } from '../../../../src/common/errors.js';
import type { CreateRequest } from '../../../../src/engine/containers/core/create.js';
import type { AttachSink } from '../../../../src/engine/containers/io/io.types.js';
import { CREATE_OPTIONS } from '../../../helpers/create-options.js';
import { eventually } from '../../../helpers/eventually.js';
import { ociSpec } from '../../../helpers/oci.js';
import { type Harness, harness } from './fakes.js';

function req(config: CreateRequest['config'], extra: Partial<CreateRequest> = {}): CreateRequest {
  return {
    config,
    hostConfig: {},
    networkingConfig: {},
    options: CREATE_OPTIONS,
    ...extra,
  };
}

async function rejectsKind(p: Promise<unknown>, kind: string, message?: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isKind(err, kind as never), `expected ${kind}, got ${String(err)}`);
    if (message) assert.match((err as Error).message, message);
    return true;
  });
}

describe('containers service (fake runtime)', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.cleanup();
  });

  it('creates with image defaults, persists atomically, registers as image user', async () => {
    const { Id, Warnings } = await h.service.create(
      req({ Image: 'busybox', Labels: { a: 'b' } }, { name: 'one' }),
    );
    assert.equal(Id.length, 64);
    assert.deepEqual(Warnings, []);
    const view = await h.service.inspect('one');
    assert.equal(view.Name, '/one');
    assert.equal(view.Path, 'sh');
    assert.deepEqual(view.Args, []);
    assert.equal(view.State.Status, 'created');
    assert.equal(view.Config.Hostname, Id.slice(0, 12));
    assert.equal(view.ResolvConfPath, '');
    const stored = JSON.parse(await readFile(join(h.dir, 'data/containers', Id, 'config.v2.json'), 'utf8'));
    assert.equal(stored.Name, '/one');
    const hc = JSON.parse(await readFile(join(h.dir, 'data/containers', Id, 'hostconfig.json'), 'utf8'));
    assert.equal(hc.ShmSize, 67108864);
    assert.deepEqual(
      h.images.users
        ?.containersUsing(h.images.images[0]!.id)
        .map((u) => u.id)
        .includes(Id),
      true,
    );
    assert.ok(h.seen.includes('create'));
  });

  it('refuses a taken name with dockerd 409 message, a bad name, a missing image, no command', async () => {
    const first = h.service.resolveId('one');
    await rejectsKind(
      h.service.create(req({ Image: 'busybox' }, { name: 'one' })),
      'Conflict',
      new RegExp(`The container name "/one" is already in use by container "${first}"`),
    );
    await rejectsKind(h.service.create(req({ Image: 'busybox' }, { name: 'bad name' })), 'InvalidParameter');
    await rejectsKind(h.service.create(req({ Image: 'nosuch' })), 'NotFound', /No such image: nosuch/);
    h.images.images[0]!.config.config = {};
    await rejectsKind(
      h.service.create(req({ Image: 'busybox' })),
      'InvalidParameter',
      /No command specified/,
    );
    h.images.images[0]!.config.config = { Cmd: ['sh'] };
  });

  it('runs the lifecycle with dockerd events: start, die, restart-less exit, wait, rm', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox', Cmd: ['true'] }, { name: 'life' }));
    h.seen.length = 0;
    const waitNext = await h.service.wait(Id, 'next-exit');
    await h.service.start(Id);
    await rejectsKind(h.service.start(Id), 'NotModified');
    let view = await h.service.inspect(Id);
    assert.equal(view.State.Running, true);
    assert.notEqual(view.ResolvConfPath, '');
    const resolv = await readFile(view.ResolvConfPath as string, 'utf8');
    assert.match(resolv, /nameserver/);
    assert.doesNotMatch(resolv, /nameserver 127\./);
    h.runtime.exit(Id, 3);
    assert.deepEqual(await waitNext(), { StatusCode: 3, Error: null });
    view = await h.service.inspect(Id);
    assert.equal(view.State.ExitCode, 3);
    assert.equal(view.State.Status, 'exited');
    const waitNow = await h.service.wait(Id, 'not-running');
    assert.equal((await waitNow()).StatusCode, 3);
    await rejectsKind(h.service.kill(Id), 'Conflict', /Cannot kill container: .*is not running/);
    await rejectsKind(h.service.stop(Id), 'NotModified');
    const ac = new AbortController();
    const abandoned = await h.service.wait(Id, 'removed', ac.signal);
    ac.abort();
    await assert.rejects(abandoned(), /client went away/);
    const waitRemoved = await h.service.wait(Id, 'removed');
    await h.service.remove(Id, {});
    assert.equal((await waitRemoved()).StatusCode, 3);
    await rejectsKind(h.service.inspect(Id), 'NotFound');
    assert.deepEqual(h.seen, ['start', 'die', 'destroy']);
  });

  it('stop sends the stop signal, then SIGKILL after the timeout; events kill/kill/die/stop', async () => {
    const { Id } = await h.service.create(
      req({ Image: 'busybox', StopSignal: 'SIGUSR1' }, { name: 'stopper' }),
    );
    await h.service.start(Id);
    h.seen.length = 0;
    h.runtime.signals = [];
    await h.service.stop(Id, { timeout: 0 });
    assert.deepEqual(
      h.runtime.signals.map(([, s]) => s),
      [10, 9],
    );
    assert.deepEqual(h.seen, ['kill', 'kill', 'die', 'stop']);
    const view = await h.service.inspect(Id);
    assert.equal(view.State.ExitCode, 137);
    await h.service.remove(Id, {});
  });

  it('rm of a running container: 409 without force, kill with force; 400 while removal is in progress', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox' }, { name: 'busy' }));
    await h.service.start(Id);
    await rejectsKind(
      h.service.remove(Id, {}),
      'Conflict',
      /cannot remove container "\/busy": container is running: stop the container before removing or force remove/,
    );
    const first = h.service.remove(Id, { force: true });
    await rejectsKind(
      h.service.remove(Id, { force: true }),
      'InvalidParameter',
      /removal of container busy is already in progress/,
    );
    await first;
    await rejectsKind(h.service.inspect('busy'), 'NotFound');
  });

  it('restarts on-failure with a retry cap and doubling delays', async () => {
    const { Id } = await h.service.create(
      req(
        { Image: 'busybox' },
        { name: 'flaky', hostConfig: { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 2 } } },
      ),
    );
    await h.service.start(Id);
    const t0 = Date.now();
    h.runtime.exit(Id, 1);
    await eventually(
      'the first restart',
      async () =>
        (await h.service.inspect(Id)).RestartCount === 1 && h.runtime.procs.get(Id)?.status === 'running',
      3000,
    );
    h.runtime.exit(Id, 1);
    await eventually(
      'the second restart',
      async () =>
        (await h.service.inspect(Id)).RestartCount === 2 && h.runtime.procs.get(Id)?.status === 'running',
      3000,
    );
    assert.ok(Date.now() - t0 >= 300, 'delays of 100 ms then 200 ms');
    h.runtime.exit(Id, 1);
    await eventually(
      'the container exited',
      async () => (await h.service.inspect(Id)).State.Status === 'exited',
      3000,
    );
    assert.equal((await h.service.inspect(Id)).RestartCount, 2);
    await h.service.remove(Id, {});
  });

  it('AutoRemove removes after exit and wait(removed) resolves', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox' }, { hostConfig: { AutoRemove: true } }));
    const w = await h.service.wait(Id, 'removed');
    await h.service.start(Id);
    h.seen.length = 0;
    h.runtime.exit(Id, 0);
    assert.equal((await w()).StatusCode, 0);
    assert.deepEqual(h.seen, ['die', 'destroy']);
  });

  it('rename, pause/unpause, resize, top checks', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox', Tty: true }, { name: 'old' }));
    await h.service.start(Id);
    h.seen.length = 0;
    await h.service.rename('old', 'new');
    await rejectsKind(h.service.rename('new', 'new'), 'InvalidParameter');
    await h.service.create(req({ Image: 'busybox' }, { name: 'taken' }));
    await rejectsKind(h.service.rename('new', 'taken'), 'Conflict');
    await h.service.pause('new');
    await rejectsKind(h.service.pause('new'), 'Conflict', /already paused/);
    await rejectsKind(
      h.service.attach('new', { stdin: true, stdout: true, stderr: true, stream: true, logs: false }),
      'Conflict',
    );
    await h.service.unpause('new');
    await rejectsKind(h.service.unpause('new'), 'Conflict', /not paused/);
    await h.service.resize('new', 40, 120);
    assert.deepEqual(h.runtime.resizes.at(-1), [Id, 40, 120]);
    assert.deepEqual(h.seen, ['rename', 'create', 'pause', 'unpause', 'resize']);
    await h.service.remove('new', { force: true });
    await h.service.remove('taken', {});
  });

  it('attach before start gets all output; stdin with StdinOnce closes on client EOF; detach keys', async () => {
    const { Id } = await h.service.create(
      req({ Image: 'busybox', OpenStdin: true, StdinOnce: true, AttachStdin: true }, { name: 'att' }),
    );
    const out: string[] = [];
    let ended = '';
    const sink: AttachSink = {
      output: (stream, data) => out.push(`${stream}:${data.toString()}`),
      end: (reason) => {
        ended = reason;
      },
    };
    const { begin } = await h.service.attach(Id, {
      stdin: true,
      stdout: true,
      stderr: true,
      stream: true,
      logs: false,
    });
    const session = await begin(sink);
    session.write(Buffer.from('hello\n'));
    session.endInput();
    await h.service.start(Id);
    const conn = h.runtime.procs.get(Id)?.conn;
    assert.ok(conn);
    assert.equal(Buffer.concat(conn.stdin).toString(), 'hello\n');
    assert.equal(conn.stdinClosed, true);
    h.runtime.output(Id, 'stdout', 'out1');
    h.runtime.output(Id, 'stderr', 'err1');
    h.runtime.exit(Id, 0);
    assert.equal(await session.done, 'exited');
    assert.equal(ended, 'exited');
    assert.deepEqual(out, ['stdout:out1', 'stderr:err1']);

    // detach with ctrl-p ctrl-q
    const { Id: id2 } = await h.service.create(
      req({ Image: 'busybox', OpenStdin: true, Tty: true }, { name: 'det' }),
    );
    await h.service.start(id2);
    const s2 = await (
      await h.service.attach(id2, { stdin: true, stdout: true, stderr: true, stream: true, logs: false })
    ).begin({ output: () => undefined, end: () => undefined });
    s2.write(Buffer.from([0x61, 0x10]));
    s2.write(Buffer.from([0x11, 0x62]));
    assert.equal(await s2.done, 'detached');
    assert.equal(Buffer.concat(h.runtime.procs.get(id2)!.conn!.stdin).toString(), 'a');
    assert.ok(h.seen.includes('detach'));
    await h.service.remove(Id, {});
    await h.service.remove(id2, { force: true });
  });

  it('live restore: running containers keep running; exits while down are recorded with die', async () => {
    const { Id: keep } = await h.service.create(req({ Image: 'busybox' }, { name: 'keep' }));
    const { Id: gone } = await h.service.create(req({ Image: 'busybox' }, { name: 'gone' }));
    const { Id: back } = await h.service.create(
      req({ Image: 'busybox' }, { name: 'back', hostConfig: { RestartPolicy: { Name: 'always' } } }),
    );
    await h.service.start(keep);
    await h.service.start(gone);
    await h.service.start(back);
    await h.service.close();
    h.runtime.exit(gone, 7, { silent: true });
    h.runtime.exit(back, 1, { silent: true });
    h.seen.length = 0;
    await h.restart();
    const k = await h.service.inspect('keep');
    assert.equal(k.State.Running, true);
    const g = await h.service.inspect('gone');
    assert.equal(g.State.Status, 'exited');
    assert.equal(g.State.ExitCode, 7);
    assert.ok(h.seen.includes('die'));
    await eventually(
      'back running again',
      async () => (await h.service.inspect('back')).State.Status === 'running',
      3000,
    );
    await h.service.stop('keep', { timeout: 1 });
    assert.equal((await h.service.inspect('keep')).State.Running, false);
    for (const n of ['keep', 'gone', 'back']) await h.service.remove(n, { force: true });
  });

  it('live restore adopts a process the runtime runs although the record was not saved as running', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox' }, { name: 'orphan' }));
    await h.service.close();
    await h.runtime.start({
      id: Id,
      bundleDir: '/nonexistent',
      spec: ociSpec(),
      terminal: false,
      stdin: false,
      stdinOnce: false,
      logPath: '/dev/null',
    });
    await h.restart();
    const v = await h.service.inspect('orphan');
    assert.equal(v.State.Status, 'running');
    await h.service.stop('orphan', { timeout: 0 });
    await h.service.remove('orphan', {});
  });

  it('restore prepares the writable layer again when a crash during create lost it', async () => {
    const { Id } = await h.service.create(req({ Image: 'busybox' }, { name: 'layerless' }));
    await h.service.close();
    h.images.snapshotter.prepared.delete(Id);
    await h.restart();
    assert.equal(h.images.snapshotter.prepared.has(Id), true);
    await h.service.remove(Id, {});
  });

  it('health checks: starting → healthy → unhealthy after Retries failures, with events', async () => {
    h.runtime.execExitCode = 0;
    const { Id } = await h.service.create(
      req(
        { Image: 'busybox', Healthcheck: { Test: ['CMD-SHELL', 'check'], Interval: 20e6, Retries: 2 } },
        { name: 'doc' },
      ),
    );
    await h.service.start(Id);
    const health = async () =>
      (
        (await h.service.inspect(Id)).State as {
          Health: { Status: string; FailingStreak: number; Log: Array<{ Output: string }> };
        }
      ).Health;
    assert.ok(['starting', 'healthy'].includes((await health()).Status));
    await eventually('healthy', async () => (await health()).Status === 'healthy', 3000);
    assert.deepEqual(h.runtime.execs[0], ['/bin/sh', '-c', 'check']);
    assert.equal((await health()).Log[0]?.Output, 'probe-out');
    h.runtime.execExitCode = 1;
    await eventually('unhealthy', async () => (await health()).Status === 'unhealthy', 3000);
    assert.ok((await health()).FailingStreak >= 2);
    assert.ok(h.seen.includes('health_status: healthy'));
    assert.ok(h.seen.includes('health_status: unhealthy'));
    const listed = await h.service.list({ filters: new Map([['health', ['unhealthy']]]) });
    assert.deepEqual(
      listed.map((c) => c.Id),
      [Id],
    );
    await h.service.remove(Id, { force: true });
  });

  it('container events carry labels, image and name as attributes; ExecIDs null without exec', async () => {
    const seen: Array<Record<string, string>> = [];
    const off = h.events.subscribe((e) => {
      if (e.Type === 'container' && e.Action === 'create') seen.push(e.Actor.Attributes);
    });
    const { Id } = await h.service.create(req({ Image: 'busybox', Labels: { l: '1' } }, { name: 'peek' }));
    off();
    assert.deepEqual(seen, [{ image: 'busybox', l: '1', name: 'peek' }]);
    assert.equal((await h.service.inspect(Id)).ExecIDs, null);
    assert.equal(h.service.resolveId('peek'), Id);
    assert.throws(() => h.service.resolveId('nope'), /No such container: nope/);
    await h.service.remove(Id, {});
  });

  it('prune removes stopped containers matching label/until, keeps running ones, emits prune', async () => {
    const a = await h.service.create(req({ Image: 'busybox', Labels: { keep: 'no' } }, { name: 'pa' }));
    const b = await h.service.create(req({ Image: 'busybox', Labels: { keep: 'yes' } }, { name: 'pb' }));
    const r = await h.service.create(req({ Image: 'busybox' }, { name: 'pr' }));
    await h.service.start(r.Id);
    assert.deepEqual(await h.service.prune(new Map([['until', ['2000-01-01']]])), {
      ContainersDeleted: null,
      SpaceReclaimed: 0,
    });
    const res = await h.service.prune(
      new Map([
        ['label', ['keep']],
        ['label!', ['keep=yes']],
      ]),
    );
    assert.deepEqual(res, { ContainersDeleted: [a.Id], SpaceReclaimed: 42 });
    assert.ok(h.seen.includes('prune'));
    await assert.rejects(h.service.prune(new Map([['bogus', ['1']]])), /invalid filter 'bogus'/);
    await h.service.remove(b.Id, {});
    await h.service.remove(r.Id, { force: true });
  });

  it('list: filters, all, ordering newest first', async () => {
    const a = await h.service.create(req({ Image: 'busybox', Labels: { team: 'a' } }, { name: 'la' }));
    const b = await h.service.create(req({ Image: 'busybox', Labels: { team: 'b' } }, { name: 'lb' }));
    await h.service.start(b.Id);
    const running = await h.service.list({});
    assert.deepEqual(
      running.map((c) => c.Names),
      [['/lb']],
    );
    const all = await h.service.list({ all: true, filters: new Map([['name', ['^/l']]]) });
    assert.deepEqual(
      all.map((c) => c.Id),
      [b.Id, a.Id],
    );
    const byLabel = await h.service.list({ all: true, filters: new Map([['label', ['team=a']]]) });
    assert.deepEqual(
      byLabel.map((c) => c.Id),
      [a.Id],
    );
    const created = await h.service.list({ filters: new Map([['status', ['created']]]) });
    assert.ok(created.some((c) => c.Id === a.Id));
    assert.ok(!created.some((c) => c.Id === b.Id));
    assert.match(String(running[0]?.Status), /^Up /);
    await rejectsKind(h.service.list({ filters: new Map([['status', ['bogus']]]) }), 'InvalidParameter');
    await rejectsKind(h.service.list({ filters: new Map([['nope', ['x']]]) }), 'InvalidParameter');
    await h.service.remove(a.Id, {});
    await h.service.remove(b.Id, { force: true });
  });
});
