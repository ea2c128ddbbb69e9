import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { until } from '../../helpers/eventually.js';
import { runCommand } from '../../helpers/process.js';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine } from '../../helpers/swarm-netns.js';

/**
 * Attachable overlays for plain containers, as dockerd in the cases issue 14's first round left
 * out (two hosts: a manager and a worker in network namespaces):
 * - `--ip` on a swarm network is asked of the manager, which claims exactly it; a taken or
 *   out-of-block address, and a network that is not attachable, are 500 with dockerd's words;
 * - `network connect`/`disconnect` of network B leaves network A's interface, address and an
 *   open TCP connection over it untouched;
 * - a `--restart always` container whose process went while the worker's engine was down comes
 *   back attached once the swarm agent is up, and reaches a service.
 */
describe('swarm: attachable overlays, static addresses, connect/disconnect and restarts', () => {
  let hosts: SwarmHosts;
  let m: NsEngine;
  let w: NsEngine;

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'worker']);
    [m, w] = hosts.engines as [NsEngine, NsEngine];
    await m.dockerOk([
      'network',
      'create',
      '-d',
      'overlay',
      '--attachable',
      '--subnet',
      '10.30.0.0/24',
      'atta',
    ]);
    await m.dockerOk([
      'network',
      'create',
      '-d',
      'overlay',
      '--attachable',
      '--subnet',
      '10.31.0.0/24',
      'attb',
    ]);
    await m.dockerOk(['network', 'create', '-d', 'overlay', '--subnet', '10.32.0.0/24', 'plain']);
  });
  after(async () => {
    for (const e of hosts?.engines ?? []) {
      const ids = (await e.docker(['ps', '-aq'])).stdout.split('\n').filter(Boolean);
      if (ids.length) await e.docker(['rm', '-f', ...ids]);
    }
    await hosts?.destroy();
  });

  /** A raw API call on an engine: its status and body. */
  async function call(e: NsEngine, method: string, path: string, body?: unknown) {
    const args = ['-s', '-o', '-', '-w', '\n%{http_code}', '--unix-socket', e.socket, '-X', method];
    if (body !== undefined) args.push('-H', 'Content-Type: application/json', '-d', JSON.stringify(body));
    const r = await runCommand('curl', [...args, `http://x/v1.41${path}`]);
    const cut = r.stdout.lastIndexOf('\n');
    return { status: Number(r.stdout.slice(cut + 1)), body: r.stdout.slice(0, cut) };
  }

  /** Create a container on a swarm network with this address and start it: the start's answer. */
  async function startWith(name: string, network: string, ip?: string) {
    const created = await call(w, 'POST', `/containers/create?name=${name}`, {
      Image: 'busybox:latest',
      Cmd: ['sleep', '300'],
      HostConfig: { NetworkMode: network },
      NetworkingConfig: {
        EndpointsConfig: { [network]: ip ? { IPAMConfig: { IPv4Address: ip } } : {} },
      },
    });
    assert.equal(created.status, 201, created.body);
    return call(w, 'POST', `/containers/${name}/start`);
  }

  interface ApiTask {
    Spec: { NetworkAttachmentSpec?: { ContainerID: string } };
    NetworksAttachments?: Array<{ Addresses: string[] }>;
  }

  it('claims the --ip asked for; a taken, out-of-block or non-attachable one is 500 in dockerd words', async () => {
    const id = await w.dockerOk([
      'run',
      '-d',
      '--name',
      'fixed',
      '--network',
      'atta',
      '--ip',
      '10.30.0.50',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const [inspected] = JSON.parse(await w.dockerOk(['inspect', 'fixed'])) as Array<{
      NetworkSettings: {
        Networks: Record<
          string,
          { IPAddress: string; IPPrefixLen: number; IPAMConfig: { IPv4Address: string } }
        >;
      };
    }>;
    const ep = inspected?.NetworkSettings.Networks.atta;
    assert.equal(ep?.IPAddress, '10.30.0.50');
    assert.equal(ep?.IPPrefixLen, 24);
    assert.equal(ep?.IPAMConfig.IPv4Address, '10.30.0.50');
    assert.match(await w.dockerOk(['exec', 'fixed', 'ip', '-o', '-4', 'addr']), /inet 10\.30\.0\.50\/24/);
    const tasks = JSON.parse((await call(m, 'GET', '/tasks')).body) as ApiTask[];
    const task = tasks.find((t) => t.Spec.NetworkAttachmentSpec?.ContainerID === id);
    assert.deepEqual(task?.NetworksAttachments?.[0]?.Addresses, ['10.30.0.50/24']);

    const failed =
      'attaching to network failed, make sure your network options are correct and check manager logs: ';
    const taken = await startWith('taken', 'atta', '10.30.0.50');
    assert.equal(taken.status, 500, taken.body);
    assert.equal(JSON.parse(taken.body).message, `${failed}Address already in use`);
    const gateway = await startWith('gw', 'atta', '10.30.0.1');
    assert.equal(gateway.status, 500, gateway.body);
    assert.equal(JSON.parse(gateway.body).message, `${failed}Address already in use`);
    const outside = await startWith('outside', 'atta', '10.99.0.5');
    assert.equal(outside.status, 500, outside.body);
    assert.equal(JSON.parse(outside.body).message, `${failed}requested address is out of range`);
    // the CLI shows it as dockerd's
    const cli = await w.docker([
      'run',
      '--rm',
      '--network',
      'atta',
      '--ip',
      '10.30.0.50',
      'busybox:latest',
      'true',
    ]);
    assert.equal(cli.code, 125);
    assert.match(
      cli.stderr,
      /Error response from daemon: attaching to network failed, .*: Address already in use/,
    );

    // not attachable: 500 at start and at connect (dockerd 20.10's status), dockerd's text
    const plain = await startWith('plainc', 'plain');
    assert.equal(plain.status, 500, plain.body);
    const refusal =
      'Could not attach to network plain: rpc error: code = PermissionDenied desc = network plain not manually attachable';
    assert.equal(JSON.parse(plain.body).message, refusal);
    const connect = await call(w, 'POST', '/networks/plain/connect', { Container: 'fixed' });
    assert.equal(connect.status, 500, connect.body);
    assert.equal(JSON.parse(connect.body).message, refusal);

    // none of the refusals holds an address or a task; the asked address comes back with its container
    const after = JSON.parse((await call(m, 'GET', '/tasks')).body) as ApiTask[];
    assert.equal(after.filter((t) => t.Spec.NetworkAttachmentSpec).length, 1, JSON.stringify(after));
    await w.dockerOk(['rm', '-f', 'fixed', 'taken', 'gw', 'outside', 'plainc']);
    const again = await startWith('again', 'atta', '10.30.0.50');
    assert.equal(again.status, 204, again.body);
    await w.dockerOk(['rm', '-f', 'again']);
  });

  it("connect and disconnect of network B leave network A's interface and an open connection alone", async () => {
    // a listener on the manager's host (its stdin held open: busybox nc ends at its EOF), a
    // client on the worker, one TCP connection over atta
    await m.dockerOk([
      'run',
      '-d',
      '--name',
      'sink',
      '--network',
      'atta',
      'busybox:latest',
      'sh',
      '-c',
      'sleep 300 | nc -l -p 9000 > /tmp/got; echo closed > /tmp/closed; sleep 300',
    ]);
    // the talker's own process: once the sink answers pings, one connection it writes to every 0.2 s
    await w.dockerOk([
      'run',
      '-d',
      '--name',
      'talker',
      '--network',
      'atta',
      'busybox:latest',
      'sh',
      '-c',
      'until ping -c 1 -W 1 sink; do sleep 1; done; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done | nc sink 9000',
    ]);
    const ticks = async () => {
      const r = await m.docker(['exec', 'sink', 'cat', '/tmp/got']);
      return r.stdout.split('\n').filter((l) => l.startsWith('tick ')).length;
    };
    await until('ticks arrive', 30_000, async () => ((await ticks()) > 2 ? true : undefined));
    const link = async () =>
      (await w.dockerOk(['exec', 'talker', 'ip', '-o', 'link', 'show', 'eth0'])).split(':')[0];
    const addr = async () => w.dockerOk(['exec', 'talker', 'ip', '-o', '-4', 'addr', 'show', 'eth0']);
    const [linkBefore, addrBefore] = [await link(), await addr()];

    // (with the address asked for, as `docker network connect --ip` does with dockerd)
    await w.dockerOk(['network', 'connect', '--ip', '10.31.0.99', 'attb', 'talker']);
    const withB = await w.dockerOk(['exec', 'talker', 'ip', '-o', '-4', 'addr']);
    assert.match(withB, /eth2\s+inet 10\.31\.0\.99\/24/, withB);
    assert.equal(await link(), linkBefore, 'eth0 is the same interface');
    assert.equal(await addr(), addrBefore);
    const atConnect = await ticks();
    await until('ticks go on after the connect', 15_000, async () =>
      (await ticks()) > atConnect + 2 ? true : undefined,
    );

    await w.dockerOk(['network', 'disconnect', 'attb', 'talker']);
    assert.doesNotMatch(await w.dockerOk(['exec', 'talker', 'ip', '-o', '-4', 'addr']), /10\.31\.0\./);
    assert.equal(await link(), linkBefore, 'eth0 is the same interface');
    assert.equal(await addr(), addrBefore);
    const atDisconnect = await ticks();
    await until('ticks go on after the disconnect', 15_000, async () =>
      (await ticks()) > atDisconnect + 2 ? true : undefined,
    );
    // one connection all along: the listener never saw it close, the count never restarted
    const got = (await m.dockerOk(['exec', 'sink', 'cat', '/tmp/got'])).split('\n');
    assert.equal(got.filter((l) => l === 'tick 0').length, 1);
    assert.notEqual(
      (await m.docker(['exec', 'sink', 'cat', '/tmp/closed'])).code,
      0,
      'the connection stayed open',
    );
    // B's attachment task went back, A's stays
    const tasks = JSON.parse((await call(m, 'GET', '/tasks')).body) as ApiTask[];
    const talker = await w.dockerOk(['inspect', '--format', '{{.Id}}', 'talker']);
    assert.equal(tasks.filter((t) => t.Spec.NetworkAttachmentSpec?.ContainerID === talker).length, 1);
    await w.dockerOk(['rm', '-f', 'talker']);
    await m.dockerOk(['rm', '-f', 'sink']);
  });

  it('brings a --restart always container back attached once the agent is up after an engine kill', async () => {
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'web',
      '--network',
      'atta',
      '--constraint',
      'node.hostname==host1',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo web-up > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await w.dockerOk([
      'run',
      '-d',
      '--name',
      'keeper',
      '--restart',
      'always',
      '--network',
      'atta',
      '--ip',
      '10.30.0.77',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const reach = (what: string) =>
      until(what, 45_000, async () => {
        const r = await w.docker([
          'exec',
          'keeper',
          'sh',
          '-c',
          `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 web 8080`,
        ]);
        return r.code === 0 && r.stdout.includes('web-up') ? true : undefined;
      });
    await reach('keeper reaches the service');
    // the engine killed, the container's process gone meanwhile: the next engine starts it by its
    // policy, which waits for the swarm agent
    const pid = Number(await w.dockerOk(['inspect', '--format', '{{.State.Pid}}', 'keeper']));
    assert.ok(pid > 0);
    await w.kill();
    process.kill(pid, 'SIGKILL');
    await w.launch();
    // (Running stays true while a policy restart waits: the status says when it runs again)
    await until('keeper running again', 45_000, async () => {
      const r = await w.docker(['inspect', '--format', '{{.State.Status}} {{.RestartCount}}', 'keeper']);
      return r.stdout.trim().startsWith('running ') ? r.stdout : undefined;
    });
    const ip = await w.dockerOk([
      'inspect',
      '--format',
      '{{.NetworkSettings.Networks.atta.IPAddress}}',
      'keeper',
    ]);
    assert.equal(ip, '10.30.0.77');
    assert.match(await w.dockerOk(['exec', 'keeper', 'ip', '-o', '-4', 'addr']), /inet 10\.30\.0\.77\/24/);
    await reach('keeper reaches the service after the engine restart');
    await w.dockerOk(['rm', '-f', 'keeper']);
    await m.dockerOk(['service', 'rm', 'web']);
  });
});
