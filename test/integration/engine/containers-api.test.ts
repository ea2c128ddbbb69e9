import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { FrameDecoder } from '../../../src/http/stream.js';
import { busyboxTarball } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/** busybox:latest in the engine, imported from the host's busybox-static when missing. */
async function ensureBusybox(engine: TestEngine): Promise<void> {
  if ((await engine.docker(['image', 'inspect', 'busybox:latest'])).code === 0) return;
  await engine.dockerOk([
    'import',
    '--change',
    'CMD ["sh"]',
    '--change',
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    await busyboxTarball(),
    'busybox:latest',
  ]);
}

// biome-ignore lint/suspicious/noExplicitAny: inspect JSON is walked freely in assertions.
type Inspect = Record<string, any>;

/** Raw HTTP: statuses, messages, stream framing and API-version behaviour of the container API. */

interface Raw {
  head: string;
  body: Buffer;
}

/** Send a raw request on a fresh connection; collect until the server ends or `untilMs`. */
function raw(
  engine: TestEngine,
  text: string,
  opts: { untilMs?: number; write?: (s: import('node:net').Socket) => void } = {},
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const s = connect(engine.socket);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => s.destroy(), opts.untilMs ?? 10_000);
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', reject);
    s.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks);
      const i = all.indexOf('\r\n\r\n');
      resolve({ head: all.subarray(0, i).toString(), body: all.subarray(i + 4) });
    });
    s.write(text);
    opts.write?.(s);
  });
}

describe('container API over raw HTTP', () => {
  let engine: TestEngine;
  const post = (path: string, body?: unknown) =>
    engine.request('POST', path, body === undefined ? {} : { body });
  const message = (r: { json<T>(): T }) => r.json<{ message: string }>().message;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('create: 201 with Warnings, 400s with dockerd messages, 404 image, 409 name', async () => {
    const ok = await post('/v1.44/containers/create?name=api1', { Image: 'busybox', Cmd: ['sleep', '600'] });
    assert.equal(ok.status, 201);
    const created = ok.json<{ Id: string; Warnings: string[] }>();
    assert.match(created.Id, /^[a-f0-9]{64}$/);
    assert.deepEqual(created.Warnings, []);
    const conflict = await post('/v1.44/containers/create?name=api1', { Image: 'busybox' });
    assert.equal(conflict.status, 409);
    assert.equal(
      message(conflict),
      `Conflict. The container name "/api1" is already in use by container "${created.Id}". You have to remove (or rename) that container to be able to reuse that name.`,
    );
    const noImage = await post('/v1.44/containers/create', { Image: 'nosuchimage' });
    assert.equal(noImage.status, 404);
    assert.match(message(noImage), /No such image: nosuchimage/);
    const cases: Array<[unknown, RegExp, string?]> = [
      [{ Image: 'busybox', Hostname: 'bad_host' }, /invalid hostname format/],
      [
        { Image: 'busybox', HostConfig: { Memory: 64 << 20, MemorySwap: 32 << 20 } },
        /memoryswap limit should be larger/,
      ],
      [{ Image: 'busybox', HostConfig: { ShmSize: -1 } }, /SHM size can not be less than 0/],
      [
        { Image: 'busybox', HostConfig: { RestartPolicy: { Name: 'always', MaximumRetryCount: 3 } } },
        /cannot be used with restart policy 'always'/,
      ],
      [
        { Image: 'busybox', HostConfig: { AutoRemove: true, RestartPolicy: { Name: 'always' } } },
        /AutoRemove/,
      ],
      [{ Image: 'busybox', ExposedPorts: { '80/bogus': {} } }, /invalid/],
      [{ Image: 'busybox', HostConfig: { PortBindings: { '80/tcp': [{ HostPort: 'x' }] } } }, /invalid port/],
      [{ Image: 'busybox', Healthcheck: { Test: ['CMD', 'true'], Interval: 10 } }, /cannot be less than 1ms/],
      [{ Image: 'busybox', HostConfig: { Binds: ['relative:dest'] } }, /invalid volume specification/],
      [
        { Image: 'busybox', HostConfig: { LogConfig: { Type: 'nosuchdriver' } } },
        /error looking up logging plugin nosuchdriver/,
      ],
      [{ Image: 'busybox', Cmd: 5 }, /cannot unmarshal/],
      [{ Image: 'busybox' }, /Invalid container name/, '/v1.44/containers/create?name=a%20b'],
    ];
    for (const [body, re, path] of cases) {
      const r = await post(path ?? '/v1.44/containers/create', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.status} ${r.text()}`);
      assert.match(message(r), re);
    }
    const bad = await engine.request('POST', '/v1.44/containers/create', {
      body: Buffer.from('{not json'),
      headers: { 'Content-Type': 'application/json' },
    });
    assert.equal(bad.status, 400);
  });

  it('malformed create bodies get a 4xx, never a 500', async () => {
    const bodies: unknown[] = [
      [],
      'x',
      { Image: 'busybox', HostConfig: { Mounts: [null] } },
      { Image: 'busybox', HostConfig: { Mounts: [{ Type: 'bind', Source: 5, Target: '/x' }] } },
      { Image: 'busybox', HostConfig: { PortBindings: { '80/tcp': 'x' } } },
      { Image: 'busybox', HostConfig: { PortBindings: { '80/tcp': [null] } } },
      { Image: 'busybox', HostConfig: { RestartPolicy: { Name: 5 } } },
      { Image: 'busybox', HostConfig: { LogConfig: { Type: 'json-file', Config: { 'max-size': 'lots' } } } },
      { Image: 'busybox', HostConfig: { Ulimits: [null] } },
      { Image: 'busybox', HostConfig: { ConsoleSize: [1] } },
      { Image: 'busybox', HostConfig: { NetworkMode: 'container:nope' } },
      { Image: 'busybox', HostConfig: { CapAdd: ['NOPE'] } },
      { Image: 'busybox', HostConfig: { Dns: ['not-an-ip'] } },
      { Image: 'busybox', HostConfig: { ExtraHosts: ['nohost'] } },
      {
        Image: 'busybox',
        NetworkingConfig: { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '300.1.1.1' } } } },
      },
      { Image: 'busybox', Healthcheck: { Interval: 'x' } },
      { Image: 'busybox', Labels: { a: 1 } },
      { Image: 'busybox', Env: [1] },
      { Image: 'busybox', StopSignal: 'SIGNOPE' },
      { Image: 'busybox', WorkingDir: 'relative' },
      { Image: 'Bad:Name' },
    ];
    for (const body of bodies) {
      const r = await post('/v1.44/containers/create', body);
      assert.ok(r.status >= 400 && r.status < 500, `${JSON.stringify(body)} → ${r.status} ${r.text()}`);
    }
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });

  it('start 204/304, stop 204/304, kill 409, rm 409, wait, inspect 404', async () => {
    assert.equal((await post('/v1.44/containers/api1/start')).status, 204);
    assert.equal((await post('/v1.44/containers/api1/start')).status, 304);
    const rm = await engine.request('DELETE', '/v1.44/containers/api1');
    assert.equal(rm.status, 409);
    assert.equal(
      message(rm),
      'cannot remove container "/api1": container is running: stop the container before removing or force remove',
    );
    assert.equal((await post('/v1.44/containers/api1/kill?signal=NOPE')).status, 400);
    assert.equal((await post('/v1.44/containers/api1/resize?h=40&w=100')).status, 200);
    assert.equal((await post('/v1.44/containers/api1/stop?t=0')).status, 204);
    assert.equal((await post('/v1.44/containers/api1/stop')).status, 304);
    const kill = await post('/v1.44/containers/api1/kill');
    assert.equal(kill.status, 409);
    assert.match(message(kill), /^Cannot kill container: api1: Container [a-f0-9]{64} is not running$/);
    const w = await post('/v1.44/containers/api1/wait');
    assert.deepEqual(w.json(), { Error: null, StatusCode: 137 });
    const w24 = await post('/v1.24/containers/api1/wait');
    assert.deepEqual(w24.json(), { Error: null, StatusCode: 137 });
    assert.equal((await post('/v1.44/containers/api1/wait?condition=bogus')).status, 400);
    assert.equal((await engine.request('GET', '/v1.44/containers/nope/json')).status, 404);
    assert.equal(
      message(await engine.request('GET', '/v1.44/containers/nope/json')),
      'No such container: nope',
    );
    assert.equal((await post('/v1.44/containers/api1/rename?name=api1')).status, 400);
    assert.equal((await engine.request('DELETE', '/v1.44/containers/api1')).status, 204);
    assert.equal((await engine.request('DELETE', '/v1.44/containers/api1')).status, 404);
  });

  it('inspect shapes: 1.24 and 1.41 like dockerd 20.10; 1.44 adds DNSNames and drops unset KernelMemory', async () => {
    const { Id } = (
      await post('/v1.44/containers/create?name=shape', {
        Image: 'busybox',
        Cmd: ['true'],
        Labels: { a: 'b' },
      })
    ).json<{ Id: string }>();
    const v24 = (await engine.request('GET', `/v1.24/containers/${Id}/json`)).json<Inspect>();
    const v41 = (await engine.request('GET', `/v1.41/containers/${Id}/json?size=1`)).json<Inspect>();
    const v44 = (await engine.request('GET', `/v1.44/containers/${Id}/json`)).json<Inspect>();
    assert.equal(v24.HostConfig.KernelMemory, 0);
    assert.equal('DNSNames' in v24.NetworkSettings.Networks.bridge, false);
    assert.equal(typeof v41.SizeRw, 'number');
    assert.equal(typeof v41.SizeRootFs, 'number');
    assert.equal('KernelMemory' in v44.HostConfig, false);
    assert.equal(v44.NetworkSettings.Networks.bridge.DNSNames, null);
    assert.equal(v44.State.Status, 'created');
    assert.equal(v44.HostConfig.NetworkMode, 'default');
    assert.equal(v44.Config.Labels.a, 'b');
    assert.equal(v44.NetworkSettings.IPAddress, '');
    const list = (
      await engine.request(
        'GET',
        '/v1.41/containers/json?all=1&filters=' + encodeURIComponent('{"name":["shape"]}'),
      )
    ).json<Array<Record<string, unknown>>>();
    assert.equal(list.length, 1);
    assert.deepEqual(Object.keys(list[0]), [
      'Id',
      'Names',
      'Image',
      'ImageID',
      'Command',
      'Created',
      'Ports',
      'Labels',
      'State',
      'Status',
      'HostConfig',
      'NetworkSettings',
      'Mounts',
    ]);
    assert.equal(
      (await engine.request('GET', '/v1.41/containers/json?filters=' + encodeURIComponent('{"bogus":["x"]}')))
        .status,
      400,
    );
    await engine.request('DELETE', `/v1.44/containers/${Id}`);
  });

  it('attach: 101 with multiplexed frames (1.42+ content type) delivers output from before start; logs framing', async () => {
    const { Id } = (
      await post('/v1.44/containers/create', {
        Image: 'busybox',
        Cmd: ['sh', '-c', 'echo out; echo err >&2'],
      })
    ).json<{ Id: string }>();
    const attaching = raw(
      engine,
      `POST /v1.44/containers/${Id}/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: x\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n`,
    );
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await post(`/v1.44/containers/${Id}/start`)).status, 204);
    const a = await attaching;
    assert.match(a.head, /^HTTP\/1.1 101 UPGRADED/);
    assert.match(a.head, /Content-Type: application\/vnd.docker.multiplexed-stream/);
    const frames = new FrameDecoder().push(a.body).map((f) => `${f.stream}:${f.payload.toString()}`);
    assert.deepEqual(frames.sort(), ['1:out\n', '2:err\n']);
    const logs = await engine.request('GET', `/v1.44/containers/${Id}/logs?stdout=1&stderr=1`);
    assert.equal(logs.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
    assert.deepEqual(
      new FrameDecoder()
        .push(logs.body)
        .map((f) => f.stream)
        .sort(),
      [1, 2],
    );
    const old = await engine.request('GET', `/v1.41/containers/${Id}/logs?stdout=1`);
    assert.equal(old.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal((await engine.request('GET', `/v1.41/containers/${Id}/logs`)).status, 400);
    await engine.request('DELETE', `/v1.44/containers/${Id}`);
  });

  it('wait sends headers at once (1.30+) so a client can start after', async () => {
    const { Id } = (
      await post('/v1.44/containers/create', { Image: 'busybox', Cmd: ['sh', '-c', 'exit 7'] })
    ).json<{ Id: string }>();
    let headAt = 0;
    const waiting = raw(
      engine,
      `POST /v1.44/containers/${Id}/wait?condition=next-exit HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      {
        write: (s) =>
          s.once('data', () => {
            headAt = Date.now();
          }),
      },
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(headAt > 0, 'headers before the container started');
    await post(`/v1.44/containers/${Id}/start`);
    const w = await waiting;
    assert.match(w.head, /200 OK/);
    assert.match(w.body.toString(), /"StatusCode":7/);
    await engine.request('DELETE', `/v1.44/containers/${Id}`);
  });

  it('attach/ws: RFC 6455 handshake, binary frames from 1.28, text before; stdin reaches the container', async () => {
    for (const [version, opcode] of [
      ['1.44', 0x2],
      ['1.27', 0x1],
    ] as const) {
      const { Id } = (
        await post(`/v${version}/containers/create`, { Image: 'busybox', Cmd: ['cat'], OpenStdin: true })
      ).json<{ Id: string }>();
      await post(`/v${version}/containers/${Id}/start`);
      const key = randomBytes(16).toString('base64');
      const payload = Buffer.from('over-ws\n');
      const mask = randomBytes(4);
      const masked = Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] ?? 0)));
      const r = await raw(
        engine,
        `GET /v${version}/containers/${Id}/attach/ws?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        {
          untilMs: 1500,
          write: (s) =>
            setTimeout(
              () => s.write(Buffer.concat([Buffer.from([0x82, 0x80 | payload.length]), mask, masked])),
              200,
            ),
        },
      );
      assert.match(r.head, /^HTTP\/1.1 101 Switching Protocols/);
      assert.match(r.head, /Sec-WebSocket-Accept: /);
      assert.equal(r.body[0], 0x80 | opcode, `version ${version}`);
      assert.equal(r.body.subarray(2, 2 + (r.body[1] ?? 0)).toString(), 'over-ws\n');
      await engine.request('DELETE', `/v1.44/containers/${Id}?force=1`);
    }
  });

  it('pause: attach answers 409; logs of a none-driver container 501; top shape', async () => {
    const { Id } = (
      await post('/v1.44/containers/create', {
        Image: 'busybox',
        Cmd: ['sleep', '600'],
        HostConfig: { LogConfig: { Type: 'none' } },
      })
    ).json<{ Id: string }>();
    await post(`/v1.44/containers/${Id}/start`);
    const top = (await engine.request('GET', `/v1.44/containers/${Id}/top`)).json<{
      Titles: string[];
      Processes: string[][];
    }>();
    assert.deepEqual(top.Titles, ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD']);
    assert.equal(top.Processes[0]?.at(-1), 'sleep 600');
    const aux = (await engine.request('GET', `/v1.44/containers/${Id}/top?ps_args=aux`)).json<{
      Titles: string[];
    }>();
    assert.ok(aux.Titles.includes('%CPU'));
    assert.equal((await engine.request('GET', `/v1.44/containers/${Id}/top?ps_args=--nope`)).status, 400);
    assert.equal((await post(`/v1.44/containers/${Id}/pause`)).status, 204);
    assert.equal((await post(`/v1.44/containers/${Id}/pause`)).status, 409);
    const att = await post(`/v1.44/containers/${Id}/attach?stream=1&stdout=1`);
    assert.equal(att.status, 409);
    assert.equal((await post(`/v1.44/containers/${Id}/unpause`)).status, 204);
    const logs = await engine.request('GET', `/v1.44/containers/${Id}/logs?stdout=1`);
    assert.equal(logs.status, 501);
    assert.equal(message(logs), 'configured logging driver does not support reading');
    assert.equal((await engine.request('DELETE', `/v1.44/containers/${Id}?force=1`)).status, 204);
  });
});
