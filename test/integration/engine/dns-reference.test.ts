import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Logger } from '../../../src/common/log.js';
import { EmbeddedDns } from '../../../src/engine/network/dns/embedded-dns.js';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { startAll } from '../../helpers/start-all.js';

const exec = promisify(execFile);

/**
 * The responder's answers against dockerd 20.10's embedded DNS, as busybox nslookup prints them:
 * on dockerd, a container on a user-defined network asks 127.0.0.11; on berth, a container on the
 * test engine's bridge asks the responder on the bridge's address (`--dns`), which knows the same
 * container under the same names. Only what both answer from their own names is compared (dockerd
 * forwards the rest to this machine's resolver, which does not answer here).
 */

const NETWORK = 'refnet';

/** nslookup of each question; the server lines (127.0.0.11 or the bridge) and the address go. */
function script(ip: string, shortId: string): string {
  return [
    'nslookup -type=a Web',
    'nslookup -type=a WWW',
    'nslookup -type=a www.refnet',
    'nslookup -type=a Web.refnet.',
    `nslookup -type=a ${shortId}.refnet`,
    `nslookup -type=a ${shortId}`,
    'nslookup -type=aaaa web',
    'nslookup -type=mx web',
    `nslookup ${ip}`,
  ]
    .map((c) => `echo "### ${c.replace(ip, 'IP').replace(shortId, 'ID')}"; ${c}; echo "rc=$?"`)
    .join('; ');
}

function normalize(out: string, ip: string, shortId: string): string[] {
  return out
    .replaceAll(ip, 'IP')
    .replaceAll(shortId, 'ID')
    .replaceAll(ip.split('.').reverse().join('.'), 'PTR')
    .split('\n')
    .filter((l) => !/^Server:\s+\S+$/.test(l) && !/^Address:\s+\S+:53$/.test(l))
    .filter((l) => l.trim() !== '');
}

describe('the DNS responder answers as dockerd 20.10 embedded DNS (busybox nslookup)', () => {
  let berth: TestEngine;
  let dockerd: ReferenceDockerd;
  let dns: EmbeddedDns;
  const outputs: { berth?: string[]; dockerd?: string[] } = {};

  before(async () => {
    [berth, dockerd] = await startAll([TestEngine.start(), ReferenceDockerd.start()]);
    await ensureBusybox(berth);
    await dockerd.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), 'busybox:latest']);
    await dockerd.dockerOk(['network', 'create', NETWORK]);
    dns = new EmbeddedDns({ log: new Logger('error'), upstreams: () => [], timeoutMs: 500 });
  });

  after(async () => {
    await dns?.close();
    await dockerd?.docker(['rm', '-f', 'Web']);
    await dockerd?.docker(['network', 'rm', NETWORK]);
    await Promise.all([berth?.destroy(), dockerd?.destroy()]);
  });

  it('on dockerd', async () => {
    const id = await dockerd.dockerOk([
      'run',
      '-d',
      '--name',
      'Web',
      '--network',
      NETWORK,
      '--network-alias',
      'www',
      'busybox',
      'sleep',
      '300',
    ]);
    const ip = await dockerd.dockerOk([
      'inspect',
      '-f',
      `{{.NetworkSettings.Networks.${NETWORK}.IPAddress}}`,
      'Web',
    ]);
    const r = await dockerd.docker([
      'run',
      '--rm',
      '--network',
      NETWORK,
      'busybox',
      'sh',
      '-c',
      script(ip, id.slice(0, 12)),
    ]);
    outputs.dockerd = normalize(r.stdout, ip, id.slice(0, 12));
  });

  it('on berth, the same', async () => {
    const bridge = JSON.parse((await exec('ip', ['-j', '-4', 'addr', 'show', 'dev', berth.bridge])).stdout);
    const gateway: string = bridge[0]?.addr_info[0]?.local ?? '';
    const subnet = `${gateway}/${bridge[0]?.addr_info[0]?.prefixlen}`;
    const id = await berth.dockerOk(['run', '-d', '--name', 'Web', 'busybox', 'sleep', '300']);
    const ip = await berth.dockerOk(['inspect', '-f', '{{.NetworkSettings.IPAddress}}', 'Web']);
    await dns.serve('net', { address: gateway, domain: NETWORK, subnets: [subnet] });
    dns.setRecords('net', [{ names: ['Web', 'www', id.slice(0, 12)], ipv4: ip }]);
    const r = await berth.docker([
      'run',
      '--rm',
      '--dns',
      gateway,
      'busybox',
      'sh',
      '-c',
      script(ip, id.slice(0, 12)),
    ]);
    outputs.berth = normalize(r.stdout, ip, id.slice(0, 12));
    assert.ok(outputs.dockerd, 'the dockerd half ran first');
    assert.ok(outputs.dockerd.includes('PTR.in-addr.arpa\tname = Web.refnet'), outputs.dockerd.join('\n'));
    assert.deepEqual(outputs.berth, outputs.dockerd);
  });
});
