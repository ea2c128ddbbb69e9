import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { get } from 'node:http';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { freePort } from '../../helpers/free-port.js';

const exec = promisify(execFile);

/**
 * Port publishing on the default bridge through the docker CLI: -p with a host address, -p H:C,
 * -P with the image's EXPOSE, udp, a taken port, stop/start, `docker port`, the ps Ports column,
 * an engine kill -9 and restart, and nothing of the engine left in iptables afterwards. The
 * expected answers are dockerd 20.10's (the same commands run against the reference dockerd).
 */

function httpGet(host: string, port: number, timeoutMs = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = get({ host, port, path: '/', timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${host}:${port} timed out`)));
    req.on('error', reject);
  });
}

/** GET until the server in the container answers (httpd takes a moment to listen). */
async function reach(host: string, port: number): Promise<string> {
  let last = '';
  await eventually(
    `http://${host}:${port}/ to answer`,
    async () => {
      try {
        last = await httpGet(host, port);
        return true;
      } catch {
        return false;
      }
    },
    10_000,
    100,
  );
  return last;
}

function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ host, port }, () => s.close(() => resolve(true)));
  });
}

const iptablesSave = async () => (await exec('iptables-save')).stdout;
const ipv6Loopback = async () => canBind('::1', 0);

/** A busybox httpd serving `text` at / on port 80. */
const httpd = (text: string, port = 80) => [
  'sh',
  '-c',
  `mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -p ${port} -h /www`,
];

describe('port publishing', () => {
  let engine: TestEngine;
  const inspect = async <T>(name: string, format: string): Promise<T> =>
    JSON.parse(await engine.dockerOk(['inspect', '-f', `{{json ${format}}}`, name])) as T;
  const ourRules = async () =>
    (await iptablesSave())
      .split('\n')
      .filter((l) => l.includes(`-${engine.bridge}`) || l.includes(`berth ports ${engine.bridge}`));
  /** The rules once the writes under way (a removed container's, batched) are done: two reads alike. */
  const settledRules = async () => {
    let last = await ourRules();
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 150));
      const now = await ourRules();
      if (now.join('\n') === last.join('\n')) return now;
      last = now;
    }
    return last;
  };

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('-p 127.0.0.1:H:C is reached from the host, inspect and docker port show it as dockerd', async () => {
    const port = await freePort();
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'web1',
      '-p',
      `127.0.0.1:${port}:80`,
      'busybox',
      ...httpd('one'),
    ]);
    assert.equal((await reach('127.0.0.1', port)).trim(), 'one');
    assert.deepEqual(await inspect('web1', '.NetworkSettings.Ports'), {
      '80/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }],
    });
    assert.deepEqual(await inspect('web1', '.HostConfig.PortBindings'), {
      '80/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }],
    });
    assert.equal(await engine.dockerOk(['port', 'web1']), `80/tcp -> 127.0.0.1:${port}`);
    assert.equal(await engine.dockerOk(['port', 'web1', '80']), `127.0.0.1:${port}`);
    // the port is the engine's while published: nobody else can take it
    assert.equal(await canBind('127.0.0.1', port), false);
    await engine.dockerOk(['rm', '-f', 'web1']);
    await eventually('the port to be free', () => canBind('127.0.0.1', port));
  });

  it('-p H:C: reached on loopback, the host own address, IPv6 loopback and from another container', async () => {
    const port = await freePort('0.0.0.0');
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'web2',
      '-p',
      `${port}:80`,
      '--expose',
      '7000',
      'busybox',
      ...httpd('two'),
    ]);
    assert.equal((await reach('127.0.0.1', port)).trim(), 'two');
    assert.equal(
      (await exec('curl', ['-sf', '--max-time', '5', `http://127.0.0.1:${port}/`])).stdout.trim(),
      'two',
    );
    const gateway = await inspect<string>('web2', '.NetworkSettings.Gateway');
    // the bridge's address is one of the host's own
    assert.equal((await httpGet(gateway, port)).trim(), 'two');
    const v6 = await ipv6Loopback();
    if (v6) assert.equal((await httpGet('::1', port)).trim(), 'two');
    const ports = await inspect<Record<string, unknown>>('web2', '.NetworkSettings.Ports');
    assert.deepEqual(ports, {
      '7000/tcp': null,
      '80/tcp': [
        { HostIp: '0.0.0.0', HostPort: String(port) },
        ...(v6 ? [{ HostIp: '::', HostPort: String(port) }] : []),
      ],
    });
    assert.deepEqual(await inspect('web2', '.HostConfig.PortBindings'), {
      '80/tcp': [{ HostIp: '', HostPort: String(port) }],
    });
    assert.equal(
      await engine.dockerOk(['ps', '--filter', 'name=web2', '--format', '{{.Ports}}']),
      // docker CLI 28 writes IPv6 addresses in brackets (20.10's wrote `:::P`)
      `7000/tcp, 0.0.0.0:${port}->80/tcp${v6 ? `, [::]:${port}->80/tcp` : ''}`,
    );
    // another container reaches it through the host's address (hairpin NAT), and so does itself
    const out = await engine.dockerOk([
      'run',
      '--rm',
      'busybox',
      'wget',
      '-q',
      '-O',
      '-',
      `http://${gateway}:${port}/`,
    ]);
    assert.equal(out.trim(), 'two');
    const self = await engine.dockerOk([
      'exec',
      'web2',
      'wget',
      '-q',
      '-O',
      '-',
      `http://${gateway}:${port}/`,
    ]);
    assert.equal(self.trim(), 'two');
  });

  it('ranges: 8000-8001:80-81 maps port to port, a host range alone takes its first free port; the list API shape', async () => {
    const b = await freePort();
    // two consecutive free ports for the mapped range
    let lo = 0;
    for (let i = 0; i < 20 && !lo; i++) {
      const p = await freePort();
      if (p < 65535 && p + 1 !== b && p !== b && (await canBind('127.0.0.1', p + 1))) lo = p;
    }
    assert.ok(lo, 'two consecutive free ports');
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'ranged',
      '-p',
      `127.0.0.1:${lo}-${lo + 1}:80-81`,
      '-p',
      `127.0.0.1:${b}-${b}:82`,
      'busybox',
      'sleep',
      '60',
    ]);
    assert.deepEqual(await inspect('ranged', '.NetworkSettings.Ports'), {
      '80/tcp': [{ HostIp: '127.0.0.1', HostPort: String(lo) }],
      '81/tcp': [{ HostIp: '127.0.0.1', HostPort: String(lo + 1) }],
      '82/tcp': [{ HostIp: '127.0.0.1', HostPort: String(b) }],
    });
    const list = (
      await engine.request('GET', '/v1.41/containers/json?filters=%7B%22name%22%3A%5B%22ranged%22%5D%7D')
    ).json<Array<{ Ports: unknown[] }>>();
    assert.deepEqual(list[0]?.Ports, [
      { IP: '127.0.0.1', PrivatePort: 80, PublicPort: lo, Type: 'tcp' },
      { IP: '127.0.0.1', PrivatePort: 81, PublicPort: lo + 1, Type: 'tcp' },
      { IP: '127.0.0.1', PrivatePort: 82, PublicPort: b, Type: 'tcp' },
    ]);
    await engine.dockerOk(['rm', '-f', 'ranged']);
  });

  it('a taken port fails the start with dockerd message and leaves nothing bound', async () => {
    const port = await freePort();
    const holder: Server = createServer();
    await new Promise<void>((r) => holder.listen({ host: '127.0.0.1', port }, () => r()));
    try {
      // the previous test's container was removed: its rules go in the background
      const before = await settledRules();
      const second = await freePort();
      const r = await engine.docker([
        'run',
        '-d',
        '--name',
        'taken',
        '-p',
        `127.0.0.1:${second}:81`,
        '-p',
        `127.0.0.1:${port}:80`,
        'busybox',
        'sleep',
        '60',
      ]);
      assert.notEqual(r.code, 0);
      assert.match(
        r.stderr,
        new RegExp(
          `driver failed programming external connectivity on endpoint taken \\([0-9a-f]{64}\\): Error starting userland proxy: listen tcp4 127\\.0\\.0\\.1:${port}: bind: address already in use`,
        ),
      );
      assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'taken']), 'created');
      assert.deepEqual(await inspect('taken', '.NetworkSettings.Ports'), {});
      // the port bound before the failing one was let go, and no rule was left
      assert.equal(await canBind('127.0.0.1', second), true);
      assert.deepEqual(await ourRules(), before);
    } finally {
      await new Promise<void>((r) => holder.close(() => r()));
    }
    // a port another container of the engine holds: dockerd's allocator message
    const port2 = await freePort();
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'holder',
      '-p',
      `127.0.0.1:${port2}:80`,
      'busybox',
      'sleep',
      '60',
    ]);
    const r2 = await engine.docker([
      'run',
      '-d',
      '--name',
      'taken2',
      '-p',
      `127.0.0.1:${port2}:80`,
      'busybox',
      'sleep',
      '60',
    ]);
    assert.match(
      r2.stderr,
      new RegExp(`Bind for 127\\.0\\.0\\.1:${port2} failed: port is already allocated`),
    );
    await engine.dockerOk(['rm', '-f', 'taken', 'taken2', 'holder']);
  });

  it('-P publishes the image EXPOSE on ephemeral ports of the kernel range; stop frees them, start binds again', async () => {
    // an image with EXPOSE (berth has no commit: import --change)
    await engine.dockerOk([
      'import',
      ...BUSYBOX_CHANGES,
      '--change',
      'EXPOSE 80 53/udp',
      await busyboxTarball(),
      'webimg:expose',
    ]);
    await engine.dockerOk(['run', '-d', '--name', 'web3', '-P', 'webimg:expose', ...httpd('three')]);
    const ports = await inspect<Record<string, Array<{ HostIp: string; HostPort: string }>>>(
      'web3',
      '.NetworkSettings.Ports',
    );
    assert.deepEqual(Object.keys(ports).sort(), ['53/udp', '80/tcp']);
    const [lo, hi] = (await exec('cat', ['/proc/sys/net/ipv4/ip_local_port_range'])).stdout
      .trim()
      .split(/\s+/)
      .map(Number);
    const tcp = Number(ports['80/tcp']?.[0]?.HostPort);
    assert.equal(ports['80/tcp']?.[0]?.HostIp, '0.0.0.0');
    assert.ok(tcp >= (lo ?? 0) && tcp <= (hi ?? 0), `${tcp} in ${lo}-${hi}`);
    assert.equal((await reach('127.0.0.1', tcp)).trim(), 'three');
    await engine.dockerOk(['stop', '-t', '1', 'web3']);
    assert.deepEqual(await inspect('web3', '.NetworkSettings.Ports'), {});
    assert.equal(await engine.dockerOk(['port', 'web3']), '');
    await eventually('the port to be free after stop', () => canBind('0.0.0.0', tcp));
    await engine.dockerOk(['start', 'web3']);
    const again = await inspect<Record<string, Array<{ HostPort: string }>>>(
      'web3',
      '.NetworkSettings.Ports',
    );
    const tcp2 = Number(again['80/tcp']?.[0]?.HostPort);
    assert.equal((await reach('127.0.0.1', tcp2)).trim(), 'three');
    await engine.dockerOk(['rm', '-f', 'web3']);
  });

  it('udp: a datagram to the published port reaches the container and its answer comes back', async () => {
    const port = await freePort();
    // the host's busybox nc has no -u: the host's perl answers datagrams in the container
    const perl =
      'use IO::Socket::INET; $|=1; my $s=IO::Socket::INET->new(LocalPort=>5353,Proto=>"udp") or die "$!"; ' +
      'while(defined $s->recv(my $m,1024)){ print "got $m\n"; $s->send("echo:$m") }';
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'udp1',
      '-v',
      '/usr:/usr:ro',
      '-v',
      '/usr/lib:/lib:ro',
      '-v',
      '/usr/lib64:/lib64:ro',
      '-p',
      `127.0.0.1:${port}:5353/udp`,
      'busybox',
      '/usr/bin/perl',
      '-e',
      perl,
    ]);
    assert.equal(await engine.dockerOk(['port', 'udp1']), `5353/udp -> 127.0.0.1:${port}`);
    const sock = createSocket('udp4');
    let reply = '';
    sock.on('message', (m) => {
      reply = m.toString();
    });
    try {
      await eventually(
        'the answer of the container',
        () => {
          sock.send('ping-udp', port, '127.0.0.1');
          return reply === 'echo:ping-udp';
        },
        10_000,
        200,
      );
    } finally {
      sock.close();
    }
    assert.match(await engine.dockerOk(['logs', 'udp1']), /got ping-udp/);
    await engine.dockerOk(['rm', '-f', 'udp1']);
  });

  it("sctp: published through the kernel rules where the kernel has SCTP; else dockerd's error", async () => {
    const port = await freePort();
    const before = await settledRules();
    const r = await engine.docker([
      'run',
      '-d',
      '--name',
      'sctp',
      '-p',
      `127.0.0.1:${port}:9000/sctp`,
      'busybox',
      'sleep',
      '60',
    ]);
    const kernelHasSctp = await exec('test', ['-e', '/proc/net/sctp']).then(
      () => true,
      () => false,
    );
    if (!kernelHasSctp) {
      // as dockerd 20.10 on this kernel (its docker-proxy cannot listen)
      assert.notEqual(r.code, 0);
      assert.match(
        r.stderr,
        /driver failed programming external connectivity on endpoint sctp \(\w+\): Error starting userland proxy: protocol not supported/,
      );
      assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'sctp']), 'created');
      assert.deepEqual(await settledRules(), before, 'no rule left');
    } else {
      assert.equal(r.code, 0, r.stderr);
      assert.equal(await engine.dockerOk(['port', 'sctp', '9000/sctp']), `127.0.0.1:${port}`);
      assert.ok((await ourRules()).some((l) => l.includes(`-p sctp -m sctp --dport ${port} -j DNAT`)));
    }
    await engine.dockerOk(['rm', '-f', 'sctp']);
    assert.deepEqual(await settledRules(), before);
  });

  it('keeps running containers ports across kill -9 and a restart; rules of gone containers go', async () => {
    const keep = await freePort();
    const gone = await freePort();
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'keep',
      '-p',
      `127.0.0.1:${keep}:80`,
      'busybox',
      ...httpd('kept'),
    ]);
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'gone',
      '-p',
      `127.0.0.1:${gone}:80`,
      'busybox',
      'sleep',
      '600',
    ]);
    assert.equal((await reach('127.0.0.1', keep)).trim(), 'kept');
    const gonePid = Number(await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', 'gone']));
    await engine.kill9();
    // the process of one container ends while the engine is down
    process.kill(gonePid, 'SIGKILL');
    assert.equal((await httpGet('127.0.0.1', keep)).trim(), 'kept');
    await engine.restart();
    assert.equal((await reach('127.0.0.1', keep)).trim(), 'kept');
    assert.equal(await canBind('127.0.0.1', keep), false);
    assert.equal(await engine.dockerOk(['port', 'keep']), `80/tcp -> 127.0.0.1:${keep}`);
    const rules = (await ourRules()).join('\n');
    assert.match(rules, new RegExp(`--dport ${keep} `));
    assert.doesNotMatch(rules, new RegExp(`--dport ${gone} `));
    assert.equal(await canBind('127.0.0.1', gone), true);
    // a graceful restart too (the engine lets its sockets go at shutdown and binds them again)
    await engine.restart();
    assert.equal((await reach('127.0.0.1', keep)).trim(), 'kept');
    assert.equal(await canBind('127.0.0.1', keep), false);
    await engine.dockerOk(['rm', '-f', 'keep', 'gone']);
  });

  it('leaves nothing of the engine in iptables once its published containers are gone', async () => {
    await engine.dockerOk(['rm', '-f', 'web2']);
    await eventually(
      'no port rules of the engine',
      async () => (await ourRules()).filter((l) => !l.includes('berth bridge')).length === 0,
    );
  });
});
