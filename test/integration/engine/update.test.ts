import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/** POST /containers/{id}/update and `docker update` against a real engine (cgroup v1 here). */
describe('docker update', () => {
  let engine: TestEngine;
  const ok = (...args: string[]) => engine.dockerOk(args);
  const update = (name: string, body: unknown) =>
    engine.request('POST', `/v1.41/containers/${name}/update`, { body });
  const message = (r: { json<T>(): T }) => r.json<{ message: string }>().message;
  const cgroup = (name: string, file: string) => ok('exec', name, 'cat', `/sys/fs/cgroup/${file}`);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it("changes a running container's cgroup limits and keeps them in its HostConfig", async () => {
    const id = await ok('run', '-d', '--name', 'limited', '-m', '64m', 'busybox', 'sleep', '1000');
    assert.equal(
      await ok('update', '-m', '32m', '--cpu-shares', '512', '--pids-limit', '20', 'limited'),
      'limited',
    );
    assert.equal(await cgroup('limited', 'memory/memory.limit_in_bytes'), String(32 << 20));
    assert.equal(await cgroup('limited', 'cpu/cpu.shares'), '512');
    assert.equal(await cgroup('limited', 'pids/pids.max'), '20');
    // a zero leaves a value as it is; swap stays what create made it (twice the first limit)
    assert.equal(
      await ok(
        'inspect',
        '-f',
        '{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.CpuShares}} {{.HostConfig.PidsLimit}}',
        id,
      ),
      `${32 << 20} ${128 << 20} 512 20`,
    );
    // after an engine restart too
    await engine.restart();
    assert.equal(await ok('inspect', '-f', '{{.HostConfig.Memory}}', id), String(32 << 20));
    // a container without a memory limit can get one (dockerd 20.10 refuses this, later ones not)
    await ok('run', '-d', '--name', 'free', 'busybox', 'sleep', '1000');
    await ok('update', '-m', '48m', 'free');
    assert.equal(await cgroup('free', 'memory/memory.limit_in_bytes'), String(48 << 20));
    await ok('rm', '-f', 'limited', 'free');
  });

  it('a stopped container gets the new limits when it starts; the restart policy applies at once', async () => {
    await ok('create', '--name', 'later', 'busybox', 'sh', '-c', 'cat /sys/fs/cgroup/cpu/cpu.shares; exit 3');
    await ok('update', '--cpu-shares', '300', 'later');
    await ok('start', '-a', 'later').catch(() => undefined);
    assert.equal(await ok('logs', 'later'), '300');
    const r = await update('later', { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 2 } });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), { Warnings: null });
    await ok('start', 'later');
    for (
      let i = 0;
      i < 100 && (await ok('inspect', '-f', '{{.RestartCount}} {{.State.Running}}', 'later')) !== '2 false';
      i++
    ) {
      await sleep(100);
    }
    assert.equal(await ok('inspect', '-f', '{{.RestartCount}} {{.State.Running}}', 'later'), '2 false');
    await ok('rm', '-f', 'later');
  });

  it("refuses what dockerd refuses, with dockerd's messages, and announces update", async () => {
    const id = await ok(
      'run',
      '-d',
      '--name',
      'strict',
      '-m',
      '64m',
      '--cpu-period',
      '100000',
      'busybox',
      'sleep',
      '1000',
    );
    const since = Math.floor(Date.now() / 1000);
    const cases: Array<[unknown, number, string]> = [
      [{ Memory: 1000 }, 400, 'Minimum memory limit allowed is 6MB'],
      [
        { Memory: 300 << 20 },
        400,
        `Cannot update container ${id}: Memory limit should be smaller than already set memoryswap limit, update the memoryswap at the same time`,
      ],
      [
        { NanoCpus: 500_000_000 },
        400,
        `Cannot update container ${id}: Conflicting options: Nano CPUs cannot be updated as CPU Period has already been set`,
      ],
      [{ RestartPolicy: { Name: 'bogus' } }, 400, "invalid restart policy 'bogus'"],
      [
        { RestartPolicy: { Name: 'always', MaximumRetryCount: 2 } },
        400,
        "maximum retry count cannot be used with restart policy 'always'",
      ],
      [
        { Memory: 'x' },
        400,
        'json: cannot unmarshal string into Go struct field UpdateConfig.Memory of type int64',
      ],
      [{ CpusetCpus: '99' }, 400, 'Requested CPUs are not available - requested 99, available: '],
    ];
    for (const [body, status, text] of cases) {
      const r = await update('strict', body);
      assert.equal(r.status, status, JSON.stringify(body));
      assert.ok(message(r).startsWith(text), `${JSON.stringify(body)}: ${message(r)}`);
    }
    assert.equal((await update('nope', { Memory: 32 << 20 })).status, 404);
    await ok('create', '--name', 'gone', '--rm', 'busybox', 'true');
    const auto = await update('gone', { RestartPolicy: { Name: 'always' } });
    assert.equal(
      message(auto),
      `Cannot update container ${await ok('inspect', '-f', '{{.Id}}', 'gone')}: Restart policy cannot be updated because AutoRemove is enabled for the container`,
    );
    // nothing of a refused update stuck
    assert.equal(
      await ok('inspect', '-f', '{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}', 'strict'),
      `${64 << 20} 0`,
    );

    assert.equal((await update('strict', { Memory: 32 << 20, MemorySwap: 64 << 20 })).status, 200);
    // this container's (an update of the test before may fall in the same second as `since`)
    const events = await engine.events(since, '{{.Actor.Attributes.name}}', [
      'event=update',
      'container=strict',
    ]);
    assert.equal(events, 'strict');
    await ok('rm', '-f', 'strict', 'gone');
  });

  it('a value the kernel or the runtime refuses is a 400, and the limits at the edges of int64 apply', async () => {
    await ok('run', '-d', '--name', 'edges', 'busybox', 'sleep', '1000');
    // found by the fuzzer: each was a 500 (the kernel's EINVAL, runc unable to read 2^63 as JS writes it)
    const rt = await update('edges', { CpuRealtimeRuntime: 93278924 });
    assert.equal(rt.status, 400, rt.text());
    assert.match(
      message(rt),
      /^Cannot update container [0-9a-f]{64}: .*cpu\.rt_runtime_us: invalid argument$/,
    );
    // runc's own bounds, and the spec's refusals, are the user's errors too (each was a 500)
    const shares = await update('edges', { CpuShares: 262145 });
    assert.equal(shares.status, 400, shares.text());
    assert.match(message(shares), /the maximum allowed cpu-shares is 262144/);
    const mixed = await update('edges', { NanoCpus: 743806953, CpuQuota: -1 });
    assert.equal(mixed.status, 400, mixed.text());
    assert.match(message(mixed), /Conflicting options/);
    // int64's edges (which a JS number reads as ±2^63) reach runc as int64's edges
    for (const body of [
      '{"CpuQuota":-9223372036854775808}',
      '{"Memory":9223372036854775807,"MemorySwap":-1}',
    ]) {
      const r = await engine.request('POST', '/v1.41/containers/edges/update', {
        body: Buffer.from(body),
        headers: { 'Content-Type': 'application/json' },
      });
      assert.equal(r.status, 200, `${body}: ${r.text()}`);
    }
    assert.ok(Number(await cgroup('edges', 'memory/memory.limit_in_bytes')) > 2 ** 62);
    // the same limit at create: refused when the container starts, as the user's error
    const made = await engine.request('POST', '/v1.41/containers/create?name=rt', {
      body: { Image: 'busybox', Cmd: ['true'], HostConfig: { CpuRealtimeRuntime: 93278924 } },
    });
    assert.equal(made.status, 201, made.text());
    const start = await engine.request('POST', '/v1.41/containers/rt/start');
    assert.equal(start.status, 400, start.text());
    await ok('rm', '-f', 'edges', 'rt');
  });
});
