import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { listAllocations } from '../../../src/engine/network/ipam.allocations.js';
import { POOL_SIZE } from '../../../src/engine/network/sandbox-pool.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';

const exec = promisify(execFile);

/**
 * kill -9 of the engine while `docker run --rm` cycles and `docker rm -f` removals are under way,
 * then a start on the same roots: what was under way is finished (every --rm container that is not
 * running is gone, every removal that was asked for is complete), nothing is left of a removed
 * container (mounts, network namespaces, veths, addresses, runtime state, monitors, directories),
 * and the containers that were running still run, their logs whole and growing.
 */

interface Inspect {
  Id: string;
  State: { Status: string; Running: boolean; Pid: number };
  HostConfig: { AutoRemove?: boolean };
  GraphDriver: { Data: { MergedDir?: string } };
  NetworkSettings: { SandboxID: string; SandboxKey: string };
}

interface SeenEvent {
  action: string;
  id: string;
  labels: Record<string, string>;
}

/** Container events as they come (the stream ends with the engine). */
function watchEvents(engine: TestEngine): { seen: SeenEvent[]; close(): void } {
  const seen: SeenEvent[] = [];
  const filters = encodeURIComponent(JSON.stringify({ type: ['container'] }));
  const req = httpRequest({ socketPath: engine.socket, path: `/v1.44/events?filters=${filters}` }, (res) => {
    let buf = '';
    res.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const e = JSON.parse(line) as {
          Action: string;
          Actor: { ID: string; Attributes: Record<string, string> };
        };
        seen.push({ action: e.Action, id: e.Actor.ID, labels: e.Actor.Attributes });
      }
    });
    res.on('error', () => undefined);
  });
  req.on('error', () => undefined);
  req.end();
  return { seen, close: () => req.destroy() };
}

/** The mount points under `dir` (per /proc/self/mountinfo). */
async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((t) => t.startsWith(`${dir}/`));
}

/** Processes whose command line names one of `ids` (a container's monitor or runtime left behind). */
async function processesNaming(ids: Iterable<string>): Promise<string[]> {
  const wanted = [...ids];
  const out: string[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmd = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const id = wanted.find((i) => cmd.includes(i));
    if (id) out.push(`${pid} (${id.slice(0, 12)}): ${cmd.replaceAll('\0', ' ').slice(0, 160)}`);
  }
  return out;
}

async function vethsOn(bridge: string): Promise<string[]> {
  const { stdout } = await exec('ip', ['-o', 'link', 'show', 'master', bridge]);
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(':')[1]?.trim() ?? l);
}

/** The numbers of a container's `tick N` lines, in the order its log has them. */
function ticks(log: string): number[] {
  return log
    .split('\n')
    .filter(Boolean)
    .map((l) => Number(/^tick (\d+)$/.exec(l)?.[1] ?? Number.NaN));
}

interface StoredRecord {
  ID: string;
  Config: { Labels?: Record<string, string> };
  State: { Status: string; RemovalInProgress: boolean };
}

/** The container records in a data root (read while no engine runs). */
async function storedStates(dataRoot: string): Promise<StoredRecord[]> {
  const dir = join(dataRoot, 'containers');
  const out: StoredRecord[] = [];
  for (const id of await readdir(dir)) {
    const text = await readFile(join(dir, id, 'config.v2.json'), 'utf8').catch(() => undefined);
    if (text) out.push(JSON.parse(text) as StoredRecord);
  }
  return out;
}

describe('engine kill -9 during runs and removals', () => {
  let engine: TestEngine;
  const ok = (...args: string[]) => engine.dockerOk(args);
  const inspect = async (id: string): Promise<Inspect | undefined> => {
    const r = await engine.request('GET', `/v1.44/containers/${id}/json`);
    if (r.status === 404) return undefined;
    assert.equal(r.status, 200, `inspect ${id}: ${r.status} ${r.text()}`);
    return r.json<Inspect>();
  };

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  /**
   * Everything the engine lists is whole; nothing is left of the `gone` containers; mounts,
   * namespaces, veths, addresses and runtime state belong to running containers only.
   */
  async function assertConsistent(gone: Set<string>): Promise<Inspect[]> {
    const listed = (await ok('ps', '-aq', '--no-trunc')).split('\n').filter(Boolean);
    // a removal answers once the container is gone from the API; its teardown (unmount, layer,
    // directories) follows in the background: let the teardowns under way end (bounded)
    await eventually(
      'the teardowns of removed containers to end',
      async () =>
        (await readdir(join(engine.dataRoot, 'containers'))).every(
          (n) => !/^[0-9a-f]{64}$/.test(n) || listed.includes(n),
        ),
      15_000,
      50,
    ).catch(() => undefined);
    const all: Inspect[] = [];
    for (const id of listed) {
      const c = await inspect(id);
      assert.ok(c, `listed container ${id} cannot be inspected`);
      assert.notEqual(c.State.Status, 'dead', `container ${id} is dead (a removal half done)`);
      assert.notEqual(c.State.Status, 'removing', `container ${id} is still being removed`);
      assert.ok(existsSync(join(engine.dataRoot, 'containers', id, 'config.v2.json')), `${id} has no record`);
      assert.ok(existsSync(join(engine.dataRoot, 'overlay', id, 'diff')), `${id} has no writable layer`);
      all.push(c);
    }
    const running = all.filter((c) => c.State.Running);
    // the stored containers are exactly the listed ones
    const stored = (await readdir(join(engine.dataRoot, 'containers'))).filter((n) =>
      /^[0-9a-f]{64}$/.test(n),
    );
    assert.deepEqual(stored.sort(), [...listed].sort(), 'container directories without a listed container');

    for (const id of gone) {
      assert.equal(await inspect(id), undefined, `removed container ${id} is still there`);
      for (const path of [
        join(engine.dataRoot, 'containers', id),
        join(engine.dataRoot, 'overlay', id),
        join(engine.dataRoot, 'runtime', id),
        join(engine.execRoot, 'containers', id),
        join(engine.execRoot, 'runc', id),
        join(engine.execRoot, 'exits', id),
      ]) {
        if (existsSync(path)) {
          const inside = await readdir(path, { recursive: true }).catch(() => []);
          assert.fail(`left behind by removed container ${id.slice(0, 12)}: ${path} [${inside.join(' ')}]`);
        }
      }
    }
    assert.deepEqual(await processesNaming(gone), [], 'processes of removed containers');

    // network namespaces, addresses, veths: one per running container on the bridge, and the
    // sandboxes the engine makes ahead (docs/networking.md): at most the next start's bare
    // namespace and POOL_SIZE plumbed ones, no container's
    const onBridge = running.filter((c) => c.NetworkSettings.SandboxKey);
    const netnsDir = join(engine.execRoot, 'netns');
    const nsFiles = existsSync(netnsDir) ? await readdir(netnsDir) : [];
    const owned = onBridge.map((c) => basename(c.NetworkSettings.SandboxKey));
    const ahead = nsFiles.filter((f) => !owned.includes(f));
    assert.deepEqual(
      nsFiles.filter((f) => owned.includes(f)).sort(),
      [...owned].sort(),
      'network namespaces of running containers',
    );
    assert.ok(ahead.length <= POOL_SIZE + 1, `network namespaces no container holds: ${ahead.join(' ')}`);
    const held = (await listAllocations(join(engine.dataRoot, 'network', 'ipam'))).map((a) => a.containerId);
    const heldAhead = held.filter((id) => ahead.some((f) => id.startsWith(f)));
    assert.deepEqual(
      held.filter((id) => !heldAhead.includes(id)).sort(),
      onBridge.map((c) => c.NetworkSettings.SandboxID).sort(),
      'addresses',
    );
    assert.ok(heldAhead.length <= POOL_SIZE, 'addresses of pooled sandboxes');
    const veths = (await vethsOn(engine.bridge)).length - onBridge.length;
    assert.ok(veths >= 0 && veths <= ahead.length, `veths on the bridge: ${veths} beyond the containers'`);
    // mounts: the rootfs and the network namespace of running containers (and those made ahead)
    const allowed = new Set([
      ...running.flatMap((c) => [c.GraphDriver.Data.MergedDir ?? '', c.NetworkSettings.SandboxKey]),
      ...ahead.map((f) => join(netnsDir, f)),
    ]);
    const stray = (await mountsUnder(engine.dir)).filter((m) => !allowed.has(m));
    assert.deepEqual(stray, [], 'mounts no running container holds');
    // the runtime knows the running containers only
    const known: string[] = [];
    for (const rt of ['runc', 'crun']) {
      const list = await exec(rt, ['--root', join(engine.execRoot, rt), 'list', '-q']);
      known.push(...list.stdout.split('\n').filter(Boolean));
    }
    assert.deepEqual(known.sort(), running.map((c) => c.Id).sort(), 'runtime state');
    return all;
  }

  it('finishes the --rm runs and rm -f removals under way; running containers keep running and logging', async (t) => {
    const tick = 'i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.05; done';
    const keepers = await Promise.all(
      ['keep-a', 'keep-b'].map((n) => ok('run', '-d', '--name', n, 'busybox', 'sh', '-c', tick)),
    );
    const pids = await Promise.all(keepers.map((k) => ok('inspect', '-f', '{{.State.Pid}}', k)));
    // the removals' targets: plain, with a restart policy (not restarted after the crash), paused,
    // with an anonymous volume removed with -v
    const kinds = [
      'plain',
      'plain',
      'plain',
      'plain',
      'always',
      'always',
      'paused',
      'paused',
      'volume',
      'volume',
    ];
    const targetInfo = new Map<string, { kind: string; pid: string; volume: string }>();
    await Promise.all(
      kinds.map(async (kind) => {
        const id = await ok(
          'run',
          '-d',
          '--label',
          'crash=target',
          ...(kind === 'always' ? ['--restart', 'always'] : []),
          ...(kind === 'volume' ? ['-v', '/data'] : []),
          'busybox',
          'sleep',
          '600',
        );
        if (kind === 'paused') await ok('pause', id);
        const pid = await ok('inspect', '-f', '{{.State.Pid}}', id);
        const volume = kind === 'volume' ? await ok('inspect', '-f', '{{(index .Mounts 0).Name}}', id) : '';
        targetInfo.set(id, { kind, pid, volume });
      }),
    );
    const targets = [...targetInfo.keys()];

    const events = watchEvents(engine);
    const cids = join(engine.dir, 'cids');
    await mkdir(cids);
    let down = false;
    const deadline = Date.now() + 20_000;
    let n = 0;
    const runner = async () => {
      for (let i = 0; i < 50 && !down && Date.now() < deadline; i++) {
        await engine.docker(
          [
            'run',
            '--rm',
            '--label',
            'crash=rm',
            '--cidfile',
            join(cids, String(n++)),
            '-v',
            '/scratch',
            'busybox',
            'sh',
            '-c',
            'echo hi; sleep 0.3',
          ],
          { timeoutMs: 20_000 },
        );
      }
    };
    const runners = Array.from({ length: 5 }, runner);
    // the runs out of step (some created, some running, some exiting) before the removals begin
    const destroyed = () =>
      events.seen.filter((e) => e.action === 'destroy' && e.labels.crash === 'rm').length;
    await eventually('runs under way', () => destroyed() >= 7, 15_000);
    const before = new Map(await Promise.all(keepers.map(async (k) => [k, await ok('logs', k)] as const)));
    // every removal at once; the engine dies while they are under way
    const removals = targets.map((t) =>
      engine.docker(['rm', '-f', ...(targetInfo.get(t)?.volume ? ['-v'] : []), t], { timeoutMs: 20_000 }),
    );
    const killed = () =>
      new Set(events.seen.filter((e) => e.action === 'kill' && targets.includes(e.id)).map((e) => e.id));
    await eventually('removals under way', () => killed().size >= 4, 15_000, 2);
    await engine.kill9();
    down = true;
    events.close();
    await Promise.all([...runners, ...removals]);
    // what the dead engine left: removals under way and --rm containers it did not remove
    const leftAtKill = await storedStates(engine.dataRoot);
    const removing = leftAtKill.filter((r) => r.State.RemovalInProgress).length;
    const autoRemove = leftAtKill.filter((r) => r.Config.Labels?.crash === 'rm');
    t.diagnostic(
      `at the kill: ${removing} removals under way, --rm containers ${autoRemove.map((r) => r.State.Status).join(' ') || 'none'}`,
    );
    assert.ok(removing > 0, 'the kill came while removals were under way');

    // started again at once on the same roots (the dead engine's lock is gone with it)
    await engine.launch();

    // the running containers run on, their logs whole (nothing lost, nothing twice) and growing
    for (const [i, k] of keepers.entries()) {
      assert.equal(await ok('inspect', '-f', '{{.State.Status}} {{.State.Pid}}', k), `running ${pids[i]}`);
      const earlier = ticks(before.get(k) ?? '');
      assert.ok(earlier.length > 0);
      let now: number[] = [];
      await eventually(
        `${k}'s log to grow`,
        async () => {
          now = ticks(await ok('logs', k));
          return now.length > earlier.length + 10;
        },
        10_000,
        100,
      );
      assert.deepEqual(now.slice(0, earlier.length), earlier, `${k}'s log before the kill`);
      assert.deepEqual(
        now,
        now.map((_, j) => j),
        `${k}'s log has every tick once, in order`,
      );
    }
    // every rm -f target is gone (its removal finished) or untouched (its request never arrived)
    const gone = new Set<string>();
    const volumesKept: string[] = [];
    for (const [t, info] of targetInfo) {
      const c = await inspect(t);
      if (!c) {
        gone.add(t);
        continue;
      }
      assert.ok(!killed().has(t), `target ${t.slice(0, 12)} was killed for removal but is still there`);
      const status = info.kind === 'paused' ? 'paused' : 'running';
      assert.equal(`${c.State.Status} ${c.State.Pid}`, `${status} ${info.pid}`, `untouched target ${t}`);
      if (info.volume) volumesKept.push(info.volume);
    }
    assert.ok(gone.size >= 4, `${gone.size} removals finished`);
    // every --rm container is gone once it is not running (those still running finish meanwhile)
    await eventually(
      '--rm containers to be removed',
      async () => (await ok('ps', '-aq', '--filter', 'label=crash=rm')) === '',
      15_000,
      100,
    );
    const runs = new Set(events.seen.filter((e) => e.labels.crash === 'rm').map((e) => e.id));
    for (const f of await readdir(cids)) {
      const id = (await readFile(join(cids, f), 'utf8')).trim();
      if (id) runs.add(id);
    }
    assert.ok(runs.size >= 5, `${runs.size} --rm runs`);
    for (const id of runs) gone.add(id);

    const left = await assertConsistent(gone);
    assert.deepEqual(
      left.filter((c) => !c.State.Running).map((c) => c.Id),
      [],
      'no stopped container is left',
    );
    // the anonymous volumes of the rm -v targets and of the --rm runs went with them; only a
    // create the kill cut short before its record was written can leave its volume behind,
    // unused (dockerd's create has the same window; `docker volume prune` removes it)
    const volumes = (await ok('volume', 'ls', '-q')).split('\n').filter(Boolean);
    for (const v of volumesKept)
      assert.ok(volumes.includes(v), `the volume of an untouched target is gone: ${v}`);
    for (const info of targetInfo.values()) {
      if (info.volume && !volumesKept.includes(info.volume))
        assert.ok(!volumes.includes(info.volume), `rm -f -v left its volume ${info.volume}`);
    }
    // a create in flight at the kill is a run without its cidfile (the CLI writes it once create answered)
    const cutShort = n - (await readdir(cids)).length;
    const dangling = (await ok('volume', 'ls', '-q', '--filter', 'dangling=true'))
      .split('\n')
      .filter(Boolean);
    const others = volumes.filter((v) => !volumesKept.includes(v));
    assert.deepEqual(
      others.filter((v) => !dangling.includes(v)),
      [],
      'volumes a removed container still uses',
    );
    assert.ok(others.length <= cutShort, `${others.length} volumes left by ${cutShort} creates cut short`);

    // and all of it can be removed
    await ok('rm', '-f', '-v', ...left.map((c) => c.Id));
    await assertConsistent(new Set([...gone, ...left.map((c) => c.Id)]));
    assert.deepEqual((await ok('volume', 'ls', '-q')).split('\n').filter(Boolean).sort(), others.sort());
  });
});
