import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { runCommand } from '../../helpers/process.js';

describe('engine system API', () => {
  let engine: TestEngine;
  before(async () => {
    engine = await TestEngine.start();
  });
  after(async () => {
    await engine?.destroy();
  });

  it('answers /_ping on GET and HEAD with the headers the CLI reads', async () => {
    for (const method of ['GET', 'HEAD']) {
      const r = await engine.request(method, '/_ping');
      assert.equal(r.status, 200);
      assert.equal(r.headers['api-version'], '1.56');
      assert.equal(r.headers.ostype, 'linux');
      assert.equal(r.headers['builder-version'], '1');
      assert.equal(r.headers['docker-experimental'], 'false');
      assert.equal(r.headers.pragma, 'no-cache');
      assert.match(String(r.headers['cache-control']), /no-cache/);
      assert.equal(r.text(), method === 'GET' ? 'OK' : '');
    }
  });

  it('serves every version from 1.24 to 1.56 and refuses others with 400', async () => {
    for (const v of ['1.24', '1.30', '1.41', '1.44', '1.50', '1.56']) {
      const r = await engine.request('GET', `/v${v}/version`);
      assert.equal(r.status, 200, v);
    }
    const old = await engine.request('GET', '/v1.23/version');
    assert.equal(old.status, 400);
    assert.match(old.json<{ message: string }>().message, /too old/);
    const neu = await engine.request('GET', '/v1.57/info');
    assert.equal(neu.status, 400);
    assert.match(neu.json<{ message: string }>().message, /too new/);
    const unknown = await engine.request('GET', '/v1.41/nothing-here');
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.json(), { message: 'page not found' });
    // dockerd's /v{version:[0-9.]+}
    assert.match((await engine.request('GET', '/v1/version')).json<{ message: string }>().message, /too old/);
    assert.equal((await engine.request('GET', '/v1.41.0/version')).status, 200);
    // HEAD only where dockerd has it (/_ping); OPTIONS answered everywhere (CORS preflight)
    assert.equal((await engine.request('HEAD', '/v1.41/version')).status, 404);
    const options = await engine.request('OPTIONS', '/v1.41/containers/create');
    assert.equal(options.status, 200);
    assert.equal(options.text(), '');
    // a JSON body must not say it is something else
    const typed = await engine.request('POST', '/v1.41/containers/create', {
      body: Buffer.from(JSON.stringify({ Image: 'busybox', Cmd: ['true'] })),
      headers: { 'Content-Type': 'text/plain' },
    });
    assert.equal(typed.status, 400);
    assert.equal(
      typed.json<{ message: string }>().message,
      "Content-Type specified (text/plain) must be 'application/json'",
    );
  });

  it('answers the same /version at every API version, as dockerd', async () => {
    const v24 = (await engine.request('GET', '/v1.24/version')).json<Record<string, unknown>>();
    const v56 = (await engine.request('GET', '/v1.56/version')).json<Record<string, unknown>>();
    assert.deepEqual(Object.keys(v24), Object.keys(v56));
    assert.equal(v56.ApiVersion, '1.56');
    assert.equal(v56.MinAPIVersion, '1.24');
    assert.ok(Array.isArray(v56.Components));
  });

  it('reports true figures in /info', async () => {
    const info = (await engine.request('GET', '/info')).json<Record<string, unknown>>();
    assert.equal(info.DockerRootDir, engine.dataRoot);
    assert.equal(info.Driver, 'overlay2');
    assert.equal(info.CgroupDriver, 'cgroupfs');
    assert.ok((info.NCPU as number) >= 1);
    assert.ok((info.MemTotal as number) > 0);
    assert.equal(typeof info.KernelVersion, 'string');
    assert.match(String(info.ID), /^([A-Z2-7]{4}:){11}[A-Z2-7]{4}$/);
    assert.deepEqual(info.SecurityOptions, ['name=seccomp,profile=default']);
    assert.deepEqual((info.Plugins as { Network: string[] }).Network, ['bridge', 'host', 'null']);
    assert.equal(info.InitBinary, 'docker-init');
    assert.match(String(info.SystemTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z$/);
    assert.ok(!('KernelMemory' in info)); // moby's router from 1.42: false, left out (omitempty)
    const v41 = (await engine.request('GET', '/v1.41/info')).json<Record<string, unknown>>();
    assert.equal(typeof v41.KernelMemory, 'boolean');
    const v24 = (await engine.request('GET', '/v1.24/info')).json<Record<string, unknown>>();
    assert.equal(v24.ExecutionDriver, '<not supported>');
    assert.deepEqual(v24.SecurityOptions, ['seccomp']);
  });

  it('counts images and containers by state in /info', async () => {
    const counts = async () => {
      const i = (await engine.request('GET', '/v1.44/info')).json<Record<string, number>>();
      return [i.Images, i.Containers, i.ContainersRunning, i.ContainersPaused, i.ContainersStopped];
    };
    const before = await counts();
    await ensureBusybox(engine);
    await engine.dockerOk(['tag', 'busybox', 'another/name:1']);
    const images = (await engine.request('GET', '/v1.44/images/json?all=1')).json<unknown[]>().length;
    const stopped = await engine.dockerOk(['create', 'busybox', 'true']);
    const running = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60']);
    const paused = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60']);
    await engine.dockerOk(['pause', paused]);
    try {
      assert.deepEqual(await counts(), [images, (before[1] ?? 0) + 3, 1, 1, (before[4] ?? 0) + 1]);
      assert.ok(images >= 1);
    } finally {
      await engine.dockerOk(['rm', '-f', stopped, running, paused]);
      await engine.dockerOk(['rmi', 'another/name:1']);
    }
  });

  it('drives docker version and docker info', async () => {
    const version = await engine.dockerOk(['version', '--format', '{{.Server.APIVersion}}']);
    assert.equal(version, '1.56');
    const info = await engine.dockerOk(['info', '--format', '{{.Driver}} {{.DockerRootDir}}']);
    assert.equal(info, `overlay2 ${engine.dataRoot}`);
  });

  it('answers swarm endpoints as dockerd outside a swarm: 503 (406 before 1.25)', async () => {
    const manager =
      'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
    for (const [method, path] of [
      ['GET', '/swarm'],
      ['GET', '/nodes'],
      ['GET', '/nodes/x'],
      ['GET', '/services'],
      ['POST', '/services/create'],
      ['DELETE', '/services/x'],
      ['GET', '/tasks'],
      ['GET', '/tasks/x/logs'],
      ['GET', '/secrets'],
      ['POST', '/secrets/create'],
      ['GET', '/configs'],
      ['POST', '/configs/x/update?version=1'], // without a version: 400 first, as dockerd
      ['GET', '/swarm/unlockkey'],
    ] as const) {
      const r = await engine.request(method, `/v1.41${path}`, { body: {} });
      assert.equal(r.status, 503, `${method} ${path}`);
      assert.deepEqual(r.json(), { message: manager });
      const old = await engine.request(method, `/v1.24${path}`, { body: {} });
      assert.equal(old.status, 406, `${method} ${path} at 1.24`);
    }
    const leave = await engine.request('POST', '/v1.44/swarm/leave?force=1');
    assert.equal(leave.status, 503);
    assert.deepEqual(leave.json(), { message: 'This node is not part of a swarm' });
    // swarm init itself: test/integration/engine/swarm-cli.test.ts
    const join = await engine.request('POST', '/v1.41/swarm/join', { body: {} });
    assert.equal(join.status, 400);
    assert.deepEqual(join.json(), { message: 'at least 1 RemoteAddr is required to join' });
    const cli = await engine.docker(['node', 'ls']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /not a swarm manager/);
  });

  it('reads /events parameters as dockerd does', async () => {
    await engine.dockerOk(['tag', 'busybox', 'events-probe:1']);
    await engine.dockerOk(['rmi', 'events-probe:1']);
    const now = (Date.now() / 1000).toFixed(3);
    // until alone replays the history up to it; filter names dockerd does not know filter nothing
    const past = await engine.request(
      'GET',
      `/events?until=${now}&filters=${encodeURIComponent('{"bogus":["x"],"type":["image"]}')}`,
    );
    assert.equal(past.status, 200);
    const actions = past
      .text()
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { Action: string }).Action);
    assert.deepEqual(actions.slice(-2), ['tag', 'untag']);
    // (untag names the image by its ID, as dockerd's does)
    // the CLI sends until in whole seconds: the events must be in a second gone by
    await sleep(1010 - (Date.now() % 1000));
    const viaCli = await engine.dockerOk(['events', '--until', '0s', '--filter', 'image=events-probe']);
    assert.match(viaCli, /image tag sha256:[0-9a-f]{64} \(name=events-probe:1\)$/);
    const badTime = await engine.request('GET', '/events?since=yesterday');
    assert.equal(badTime.status, 400);
    const reversed = await engine.request('GET', '/events?since=20&until=10');
    assert.equal(reversed.status, 400);
    assert.equal(
      reversed.json<{ message: string }>().message,
      '`since` time (20) cannot be after `until` time (10)',
    );
    const r = await engine.docker(['events', '--since', '1m', '--until', '0s']);
    assert.equal(r.code, 0, r.stderr);
    // an until a month away (past setTimeout's limit) keeps the stream open
    const month = (Date.now() / 1000 + 30 * 86400).toFixed(0);
    await assert.rejects(engine.request('GET', `/events?until=${month}`, { timeoutMs: 1500 }), /timed out/);
  });
});

describe('engine listening on several hosts', () => {
  it('serves the same API on a unix socket and on tcp://127.0.0.1 (--host repeated)', async () => {
    const port = await new Promise<number>((resolve, reject) => {
      const probe = createServer();
      probe.once('error', reject);
      probe.listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const engine = await TestEngine.start({ args: ['--host', `tcp://127.0.0.1:${port}`] });
    try {
      const viaUnix = await engine.dockerOk(['info', '--format', '{{.ID}}']);
      const tcp = await runCommand(
        'docker',
        ['-H', `tcp://127.0.0.1:${port}`, 'info', '--format', '{{.ID}}'],
        {
          env: { DOCKER_CONFIG: engine.dockerConfig },
        },
      );
      assert.equal(tcp.code, 0, tcp.stderr);
      assert.equal(tcp.stdout.trim(), viaUnix);
    } finally {
      await engine.destroy();
    }
  });
});
