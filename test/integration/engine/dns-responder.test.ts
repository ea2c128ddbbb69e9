import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Logger } from '../../../src/common/log.js';
import { EmbeddedDns } from '../../../src/engine/network/dns/embedded-dns.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { FakeUpstream } from '../../unit/engine/network/dns-client.js';

/**
 * The engine's DNS responder on a real bridge, without user-defined networks: the responder runs in
 * this process on the test engine's bridge address, port 53, with the bridge's block as its
 * network, and busybox containers on the default bridge are pointed at it with `--dns`. Their
 * queries cross the veth and the bridge as a user-defined network's would. The "world" is a fake
 * server on loopback (the responder forwards from the host).
 */

const exec = promisify(execFile);

interface NetworkInspect {
  IPAM: { Config: Array<{ Subnet: string; Gateway?: string }> };
}

describe('the DNS responder on a bridge (busybox nslookup and wget)', () => {
  let engine: TestEngine;
  let dns: EmbeddedDns;
  const world = new FakeUpstream('192.0.2.99');
  let gateway = '';
  let webIp = '';
  let webId = '';

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    await world.start();
    const bridge = (await engine.request('GET', '/v1.41/networks/bridge')).json<NetworkInspect>();
    const subnet = bridge.IPAM.Config[0]?.Subnet ?? '';
    // the bridge's own address (inspect shows no Gateway for a block the engine picked)
    const link = JSON.parse((await exec('ip', ['-j', '-4', 'addr', 'show', 'dev', engine.bridge])).stdout);
    gateway = link[0]?.addr_info[0]?.local ?? '';
    assert.ok(subnet && gateway, JSON.stringify(bridge.IPAM));
    webId = await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'web',
      'busybox',
      'httpd',
      '-f',
      '-p',
      '80',
      '-h',
      '/etc',
    ]);
    webIp = await engine.dockerOk(['inspect', '-f', '{{.NetworkSettings.IPAddress}}', 'web']);
    dns = new EmbeddedDns({
      log: new Logger('error'),
      upstreams: () => [`127.0.0.1:${world.port}`],
      timeoutMs: 500,
    });
    await dns.serve('bridge', { address: gateway, domain: 'testnet', subnets: [subnet] });
    dns.setRecords('bridge', [{ names: ['web', 'www', webId.slice(0, 12)], ipv4: webIp }]);
  });

  after(async () => {
    await dns?.close();
    await world.stop().catch(() => undefined);
    await engine?.destroy();
  });

  const lookup = (...args: string[]) =>
    engine.docker(['run', '--rm', '--dns', gateway, 'busybox', 'nslookup', ...args]);

  it('resolves a name, an alias, a short ID and <name>.<network> from a container', async () => {
    for (const name of ['web', 'www', webId.slice(0, 12), 'web.testnet']) {
      const r = await lookup('-type=a', name);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, new RegExp(`Name:\\s+${name}\\nAddress:\\s+${webIp.replaceAll('.', '\\.')}\\n`));
    }
  });

  it('reaches the container by name (wget against httpd)', async () => {
    const body = await engine.dockerOk([
      'run',
      '--rm',
      '--dns',
      gateway,
      'busybox',
      'wget',
      '-q',
      '-O-',
      'http://web/hostname',
    ]);
    assert.equal(body, webId.slice(0, 12));
  });

  it('answers PTR for the address, forwards other names, NXDOMAIN from upstream', async () => {
    const ptr = await lookup(webIp);
    assert.match(ptr.stdout, /name = web\.testnet/);
    const out = await lookup('-type=a', 'host.example');
    assert.match(out.stdout, /Address:\s+192\.0\.2\.99/);
    const missing = await lookup('-type=a', 'nope');
    assert.notEqual(missing.code, 0);
    assert.match(missing.stdout + missing.stderr, /NXDOMAIN/);
  });
});
