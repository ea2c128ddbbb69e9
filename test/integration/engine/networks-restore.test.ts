import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';

const exec = promisify(execFile);

/**
 * User-defined networks across an engine kill -9 and restart: running containers keep their
 * interfaces, addresses and traffic (live restore), the network and its bridge stay, addresses
 * are reused after removals, and once everything is removed no veth, bridge, iptables rule or
 * IP lease is left.
 */

const links = async () => (await exec('ip', ['-o', 'link', 'show'])).stdout;
const iptablesSave = async () =>
  (await exec('iptables-save')).stdout + (await exec('iptables-save', ['-t', 'nat'])).stdout;

describe('user-defined networks across engine restarts', () => {
  let engine: TestEngine;
  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  const ipOn = async (c: string, net: string) =>
    engine.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, c]);
  const ping = async (from: string, ip: string) =>
    (await engine.docker(['exec', from, 'ping', '-c', '1', '-W', '2', ip])).code === 0;

  it('keeps running containers networked through kill -9, then leaves nothing behind', async () => {
    await engine.dockerOk(['network', 'create', '--subnet', '10.217.0.0/24', 'keep']);
    const id = await engine.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'keep']);
    const bridge = `br-${id.slice(0, 12)}`;
    await engine.dockerOk(['run', '-d', '--name', 'ka', '--network', 'keep', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['run', '-d', '--name', 'kb', '--network', 'keep', 'busybox', 'sleep', '600']);
    const ipA = await ipOn('ka', 'keep');
    assert.ok(await ping('kb', ipA));

    await engine.kill9();
    await engine.launch();
    assert.equal(await ipOn('ka', 'keep'), ipA, 'the address survives');
    assert.ok(await ping('kb', ipA), 'traffic survives');
    const ns = await engine.dockerOk(['exec', 'kb', 'nslookup', '-type=a', 'ka']);
    assert.match(ns, new RegExp(`Address:\\s*${ipA.replaceAll('.', '\\.')}`), 'DNS names come back');
    // a rename: the new name resolves
    await engine.dockerOk(['rename', 'ka', 'kx']);
    const renamed = await engine.dockerOk(['exec', 'kb', 'nslookup', '-type=a', 'kx']);
    assert.match(renamed, new RegExp(`Address:\\s*${ipA.replaceAll('.', '\\.')}`), 'the new name resolves');
    await engine.dockerOk(['rename', 'kx', 'ka']);
    // a new container gets a free address, not one a running container holds
    await engine.dockerOk(['run', '-d', '--name', 'kc', '--network', 'keep', 'busybox', 'sleep', '600']);
    const ipC = await ipOn('kc', 'keep');
    assert.ok(![ipA, await ipOn('kb', 'keep')].includes(ipC));
    // addresses are reused after a removal
    await engine.dockerOk(['rm', '-f', 'kc']);
    await engine.dockerOk(['run', '-d', '--name', 'kd', '--network', 'keep', 'busybox', 'sleep', '600']);
    assert.equal(await ipOn('kd', 'keep'), ipC);

    await engine.dockerOk(['rm', '-f', 'ka', 'kb', 'kd']);
    await engine.dockerOk(['network', 'rm', 'keep']);
    await eventually('the bridge and its veths gone', async () => !(await links()).includes(bridge));
    assert.doesNotMatch(await iptablesSave(), new RegExp(bridge));
    const leases = await exec('find', [`${engine.dataRoot}/network/ipam`, '-type', 'f', '-name', '10.217.*']);
    assert.equal(leases.stdout.trim(), '', 'no IP lease left');
  });
});
