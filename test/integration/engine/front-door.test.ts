import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { globalAgent } from 'node:http';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as tlsConnect } from 'node:tls';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { type RunResult, runCommand } from '../../helpers/process.js';
import { RawConnection, rawExchange } from '../../helpers/raw-http.js';
import { makeTestCertificates, type TestCertificates } from '../../helpers/tls-certs.js';

/** The tcp:// address an engine logged it listens on. */
function tcpPort(engine: TestEngine): number {
  const m = /msg="API listening" address="tcp:\/\/127\.0\.0\.1:(\d+)"/.exec(engine.log());
  if (!m) throw new Error(`no tcp listener in the log:\n${engine.log()}`);
  return Number(m[1]);
}

/** The docker CLI against an engine's tcp:// address, with the given flags and cert directory. */
function dockerTcp(
  engine: TestEngine,
  flags: string[],
  certDir: string | undefined,
  args: string[],
  input?: string,
): Promise<RunResult> {
  return runCommand('docker', [...flags, '-H', `tcp://127.0.0.1:${tcpPort(engine)}`, ...args], {
    input,
    timeoutMs: 60_000,
    env: {
      DOCKER_CONFIG: engine.dockerConfig,
      DOCKER_HOST: '',
      DOCKER_TLS_VERIFY: '',
      DOCKER_CERT_PATH: certDir ?? '',
      DOCKER_CLI_HINTS: 'false',
    },
  });
}

/** The first group of /etc/group other than root, with its gid. */
function someGroup(): { name: string; gid: number } {
  for (const line of readFileSync('/etc/group', 'utf8').split('\n')) {
    const [name, , gid] = line.split(':');
    if (name && name !== 'root' && gid && Number(gid) > 0) return { name, gid: Number(gid) };
  }
  throw new Error('no group besides root in /etc/group');
}

function dockerGid(): number | undefined {
  for (const line of readFileSync('/etc/group', 'utf8').split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === 'docker') return Number(gid);
  }
  return undefined;
}

/** Start an engine that must refuse to start; answers its log. */
async function refusedStart(args: string[]): Promise<string> {
  try {
    const engine = await TestEngine.start({ bridge: 'none', args });
    await engine.destroy();
  } catch (err) {
    return String(err);
  }
  throw new Error(`the engine started with ${args.join(' ')}`);
}

describe('engine front door: TLS, socket group, warnings, connection caps', () => {
  let dir: string;
  let certs: TestCertificates;
  /** --tlsverify on tcp://127.0.0.1, default group */
  let verify: TestEngine;
  /** --tls (no client verification), -G 4242 */
  let tlsOnly: TestEngine;
  /** plain tcp:// on loopback, -G by name, small connection caps */
  let plain: TestEngine;
  const group = someGroup();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-frontdoor-'));
    certs = await makeTestCertificates(join(dir, 'certs'));
    const server = ['--tlscert', certs.serverCert, '--tlskey', certs.serverKey];
    [verify, tlsOnly, plain] = await Promise.all([
      TestEngine.start({
        bridge: 'none',
        args: ['-H', 'tcp://127.0.0.1:0', '--tlsverify', '--tlscacert', certs.ca, ...server],
      }),
      TestEngine.start({
        bridge: 'none',
        args: ['-H', 'tcp://127.0.0.1:0', '--tls', ...server, '-G', '4242'],
      }),
      TestEngine.start({
        bridge: 'none',
        args: [
          '-H',
          'tcp://127.0.0.1:0',
          '-G',
          group.name,
          '--max-header-size',
          '8k',
          '--headers-timeout',
          '500ms',
          '--body-idle-timeout',
          '500ms',
          '--max-connections-per-client',
          '4',
          '--max-local-connections',
          '8',
        ],
      }),
    ]);
    await Promise.all([ensureBusybox(verify), ensureBusybox(plain)]);
  });
  after(async () => {
    await Promise.all([verify?.destroy(), tlsOnly?.destroy(), plain?.destroy()]);
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the docker CLI over TLS with a client certificate: version, run, stdin, exec', async () => {
    const tls = (args: string[], input?: string) =>
      dockerTcp(verify, ['--tlsverify'], certs.clientDir, args, input);
    const version = await tls(['version', '--format', '{{.Server.Version}}']);
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stdout, /\d+\.\d+/);
    // attach over TLS: the CLI half-closes (close_notify) when it has no stdin; output still comes
    const run = await tls(['run', '--rm', 'busybox', 'echo', 'over-tls']);
    assert.equal(run.stdout.trim(), 'over-tls', run.stderr);
    const cat = await tls(['run', '-i', '--rm', 'busybox', 'cat'], 'stdin over tls\n');
    assert.equal(cat.stdout, 'stdin over tls\n', cat.stderr);
    assert.equal((await tls(['run', '-d', '--name', 'tls-exec', 'busybox', 'sleep', '60'])).code, 0);
    const exec = await tls(['exec', 'tls-exec', 'echo', 'exec-over-tls']);
    assert.equal(exec.stdout.trim(), 'exec-over-tls', exec.stderr);
    assert.equal((await tls(['rm', '-f', 'tls-exec'])).code, 0);
    // with --tlsverify docker info has no API warning
    const info = await tls(['info']);
    assert.equal(info.code, 0, info.stderr);
    assert.doesNotMatch(info.stderr, /API is accessible/);
  });

  it('refuses a client without a certificate signed by the CA (--tlsverify)', async () => {
    for (const certDir of [certs.noCertDir, certs.rogueDir]) {
      const r = await dockerTcp(verify, ['--tlsverify'], certDir, [
        'version',
        '--format',
        '{{.Server.Version}}',
      ]);
      assert.notEqual(r.code, 0, `${certDir}: ${r.stdout}`);
      assert.match(r.stderr, /certificate required|bad certificate|unknown certificate authority/);
    }
    // plain HTTP on the TLS port gets nothing
    const plainHttp = await dockerTcp(verify, [], undefined, ['version', '--format', '{{.Server.Version}}']);
    assert.notEqual(plainHttp.code, 0);
    // a TLS client with no certificate never gets an HTTP answer
    const answer = await new Promise<string>((resolve) => {
      const s = tlsConnect({ host: '127.0.0.1', port: tcpPort(verify), rejectUnauthorized: false }, () => {
        s.write('GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      let got = '';
      s.on('data', (d: Buffer) => {
        got += d.toString();
      });
      s.on('error', (e) => resolve(`error: ${e.message}`));
      s.on('close', () => resolve(got || 'closed'));
      setTimeout(() => s.destroy(), 5000);
    });
    assert.doesNotMatch(answer, /HTTP\/1\.1 200/);
    // the engine serves on
    assert.equal((await verify.request('GET', '/_ping')).status, 200);
  });

  it('serves --tls without client verification to `docker --tls`, and docker info warns about it', async () => {
    const r = await dockerTcp(tlsOnly, ['--tls'], certs.noCertDir, ['info']);
    assert.equal(r.code, 0, r.stderr);
    const port = tcpPort(tlsOnly);
    assert.ok(
      r.stderr.includes(
        `WARNING: API is accessible on https://127.0.0.1:${port} without TLS client verification.\n` +
          '         Access to the remote API is equivalent to root access on the host.',
      ),
      r.stderr,
    );
    // the unix socket got the group it was given, by number
    const st = statSync(tlsOnly.socket);
    assert.equal(st.gid, 4242);
    assert.equal(st.mode & 0o777, 0o660);
  });

  it('starts plain tcp:// on loopback with dockerd warnings in the log and in docker info', async () => {
    const port = tcpPort(plain);
    const r = await dockerTcp(plain, [], undefined, ['info']);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(
      r.stderr.includes(
        `WARNING: API is accessible on http://127.0.0.1:${port} without encryption.\n` +
          '         Access to the remote API is equivalent to root access on the host. Refer\n' +
          "         to the 'Docker daemon attack surface' section in the documentation for\n" +
          '         more information: https://docs.docker.com/go/attack-surface/',
      ),
      r.stderr,
    );
    const log = plain.log();
    assert.match(log, /level=warn .*Binding to IP address without --tlsverify is insecure/);
    assert.match(
      log,
      /level=warn .*WARNING: API is accessible on http:\/\/127\.0\.0\.1:\d+ without encryption/,
    );
    // the info Warnings through the API too (a JSON list)
    const info = await plain.request('GET', '/v1.41/info');
    assert.ok(info.json<{ Warnings: string[] }>().Warnings.some((w) => w.includes('without encryption')));
  });

  it('gives the unix socket the docker group by default and mode 0660, or the group named by -G', () => {
    const docker = dockerGid();
    const st = statSync(verify.socket);
    assert.equal(st.mode & 0o777, 0o660);
    assert.equal(st.gid, docker ?? process.getgid?.());
    assert.equal(statSync(plain.socket).gid, group.gid);
  });

  it('refuses plain tcp:// off loopback without --insecure-tcp-without-tls, and an unknown group', async () => {
    const hosts = ['tcp://0.0.0.0:0'];
    const external = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal);
    if (external) hosts.push(`tcp://${external.address}:0`);
    const [groupLog, ...logs] = await Promise.all([
      refusedStart(['-G', 'no-such-group-berth']),
      ...hosts.map((host) => refusedStart(['-H', host])),
    ]);
    assert.match(groupLog ?? '', /group no-such-group-berth not found/);
    for (const log of logs) {
      assert.match(
        log,
        /refusing to listen on tcp:\/\/.* without TLS: anyone who reaches this address gets root/,
      );
      assert.match(log, /--insecure-tcp-without-tls/);
    }
  });

  it('answers 431 to oversized headers and 408 to slow headers, over TCP and the unix socket', async () => {
    for (const target of [{ port: tcpPort(plain) }, { path: plain.socket }]) {
      const big = await rawExchange(
        target,
        `GET /_ping HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(9000)}\r\n\r\n`,
      );
      assert.match(big, /^HTTP\/1\.1 431/);
      assert.match(big, /"message":"request headers exceed the limit of 8192 bytes"/);
      const slow = await RawConnection.open(target);
      slow.write('GET /_ping HTTP/1.1\r\nHost: x\r\n');
      assert.ok(await slow.waitClosed(5000), 'slow headers cut');
      assert.equal(slow.status(), 408);
    }
    assert.equal((await plain.request('GET', '/_ping')).status, 200);
  });

  it('answers 408 to a request body that stalls, and closes it', async () => {
    const c = await RawConnection.open({ path: plain.socket });
    c.write(
      'POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"Image":',
    );
    assert.ok(await c.waitClosed(5000), 'the stalled body was cut');
    assert.equal(c.status(), 408);
    assert.match(c.text(), /"message":"the request body stalled: no data received for 500 ms"/);
    assert.equal((await plain.request('GET', '/_ping')).status, 200);
  });

  it('answers 429 past the connections of one client (TCP) or of the unix socket', async () => {
    const port = tcpPort(plain);
    // the test's own keep-alive connections (engine.request) would count on the unix socket
    globalAgent.destroy();
    await sleep(100);
    const held: RawConnection[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const c = await RawConnection.open({ port });
        c.write('GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n');
        assert.ok(await c.waitFor(/OK$/, 3000), `tcp ${i}: ${c.text()}`);
        held.push(c);
      }
      const over = await rawExchange({ port }, 'GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.match(over, /^HTTP\/1\.1 429/);
      assert.match(
        over,
        /"message":"too many open connections from 127\.0\.0\.1 \(the limit is 4 per client\)"/,
      );
      for (let i = 0; i < 8; i++) {
        const c = await RawConnection.open({ path: plain.socket });
        c.write('GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n');
        assert.ok(await c.waitFor(/OK$/, 3000), `unix ${i}: ${c.text()}`);
        held.push(c);
      }
      const overLocal = await rawExchange({ path: plain.socket }, 'GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.match(overLocal, /^HTTP\/1\.1 429/);
      assert.match(overLocal, /too many open connections on this socket \(the limit is 8\)/);
    } finally {
      for (const c of held) c.destroy();
    }
    await sleep(200);
    assert.equal((await plain.request('GET', '/_ping')).status, 200);
  });

  it('does not cut long streams: events that stay silent, an attach whose client pauses', async () => {
    const now = Math.floor(Date.now() / 1000);
    const t0 = Date.now();
    const events = await plain.request('GET', `/v1.41/events?since=${now}&until=${now + 2}`, {
      timeoutMs: 10_000,
    });
    assert.equal(events.status, 200);
    assert.ok(Date.now() - t0 >= 1000, 'the events stream stayed open until its end');
    const id = (await plain.dockerOk(['run', '-d', '-i', 'busybox', 'cat'])).trim();
    const c = await RawConnection.open({ path: plain.socket });
    try {
      c.write(
        `POST /v1.41/containers/${id}/attach?stream=1&stdin=1&stdout=1 HTTP/1.1\r\nHost: x\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n`,
      );
      assert.ok(await c.waitFor(/101 UPGRADED/, 3000), c.text());
      await sleep(1500);
      c.write('after a pause\n');
      assert.ok(await c.waitFor(/after a pause/, 3000), `${JSON.stringify(c.text())}`);
      assert.equal(c.closedAt, undefined);
    } finally {
      c.destroy();
      await plain.docker(['rm', '-f', id]);
    }
  });
});
