import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { until } from '../../helpers/eventually.js';
import { runCommand } from '../../helpers/process.js';
import { engineLogsOnFailure, NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';
import { overlayNamespaces, runningTaskContainer } from '../../helpers/swarm-overlay.js';

/**
 * `--data-path-addr` apart from the advertise address (issue 14 §1, §9 step 2), and what
 * `docker network inspect` shows of an overlay on the nodes that have it. Two hosts on one
 * switch, each with a second link to it (`dp0`, its own block) for the data path: host 1 inits
 * with `--advertise-addr` on eth0 and `--data-path-addr` the address of dp0, host 2 joins with
 * `--data-path-addr dp0` (an interface). A task on host 1 fetches HTTP from a vip service's task
 * on host 2 over the overlay; the FDB entries name the data-path addresses, the encapsulated
 * traffic leaves by dp0 alone (nft counters on each link), and the node objects still show the
 * advertise addresses (as dockerd's `Status.Addr`). Network inspect on a node with a task shows
 * its containers and the peers; a manager without a task shows neither.
 */
describe('swarm data path apart from the advertise address', () => {
  let net: TestNetwork;
  let engines: NsEngine[] = [];
  const dataBlock = '192.168.204';

  async function ipOk(args: string[]): Promise<void> {
    const r = await runCommand('ip', args);
    if (r.code !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  }

  async function inHost(i: number, cmd: string[]): Promise<string> {
    const r = await net.exec(i, cmd);
    if (r.code !== 0) throw new Error(`${cmd.join(' ')} in host ${i}: ${r.code} ${r.stderr}`);
    return r.stdout;
  }

  /** VXLAN packets that left host `i` by each link (its nft counters). */
  async function vxlanOut(i: number): Promise<{ eth0: number; dp0: number }> {
    const text = await inHost(i, ['nft', 'list', 'chain', 'inet', 'dpt', 'out']);
    const count = (dev: string) =>
      Number(new RegExp(`oifname "${dev}" udp dport 4789 counter packets (\\d+)`).exec(text)?.[1] ?? 'NaN');
    return { eth0: count('eth0'), dp0: count('dp0') };
  }

  engineLogsOnFailure(() => engines);
  before(async () => {
    net = await TestNetwork.create(2);
    for (const i of [1, 2]) {
      const host = net.hosts[i - 1] ?? '';
      // a second link from the host to the switch, on a block of its own: the data path
      await ipOk([
        '-n',
        net.switchNs,
        'link',
        'add',
        `dp${i}`,
        'type',
        'veth',
        'peer',
        'name',
        'dp0',
        'netns',
        host,
      ]);
      await ipOk(['-n', net.switchNs, 'link', 'set', `dp${i}`, 'master', 'br0', 'up']);
      await ipOk(['-n', host, 'addr', 'add', `${dataBlock}.${i}/24`, 'dev', 'dp0']);
      await ipOk(['-n', host, 'link', 'set', 'dp0', 'up']);
      // counters of the VXLAN packets leaving by each link (gone with the namespace)
      await inHost(i, ['nft', 'add', 'table', 'inet', 'dpt']);
      await inHost(i, [
        'nft',
        'add',
        'chain',
        'inet',
        'dpt',
        'out',
        '{ type filter hook output priority 0 ; }',
      ]);
      for (const dev of ['eth0', 'dp0']) {
        await inHost(i, [
          'nft',
          'add',
          'rule',
          'inet',
          'dpt',
          'out',
          'oifname',
          dev,
          'udp',
          'dport',
          '4789',
          'counter',
        ]);
      }
    }
    engines = await Promise.all([1, 2].map((i) => NsEngine.start(net.hosts[i - 1] ?? '', `dphost${i}`)));
    const tar = await busyboxTarball();
    await Promise.all(engines.map((e) => e.dockerOk(['import', ...BUSYBOX_CHANGES, tar, 'busybox:latest'])));
    const [m, w] = engines as [NsEngine, NsEngine];
    await m.dockerOk([
      'swarm',
      'init',
      '--dispatcher-heartbeat',
      '1s',
      '--advertise-addr',
      net.address(1),
      '--data-path-addr',
      `${dataBlock}.1`,
    ]);
    const token = await m.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    await w.dockerOk([
      'swarm',
      'join',
      '--token',
      token,
      '--advertise-addr',
      net.address(2),
      '--data-path-addr',
      'dp0',
      `${net.address(1)}:2377`,
    ]);
  });
  after(async () => {
    await engines[1]?.destroy();
    await engines[0]?.destroy();
    await net?.destroy();
  });

  interface InspectedNetwork {
    Containers: Record<
      string,
      { Name: string; EndpointID: string; MacAddress: string; IPv4Address: string; IPv6Address: string }
    > | null;
    Peers?: Array<{ Name: string; IP: string }>;
    Labels: Record<string, string> | null;
  }

  async function inspectNetwork(e: NsEngine, name: string): Promise<InspectedNetwork> {
    const [n] = JSON.parse(await e.dockerOk(['network', 'inspect', name])) as InspectedNetwork[];
    assert.ok(n);
    return n;
  }

  it('carries the overlay over the data-path addresses; inspect shows the local containers and peers', async () => {
    const [m, w] = engines as [NsEngine, NsEngine];
    // the nodes show their advertise addresses, as dockerd's Status.Addr
    assert.equal(
      await m.dockerOk(['node', 'inspect', '--format', '{{.Status.Addr}}', 'dphost1']),
      net.address(1),
    );
    assert.equal(
      await m.dockerOk(['node', 'inspect', '--format', '{{.Status.Addr}}', 'dphost2']),
      net.address(2),
    );

    const [node2] = JSON.parse(await m.dockerOk(['node', 'inspect', 'dphost2'])) as Array<
      Record<string, unknown>
    >;
    assert.deepEqual(Object.keys(node2 ?? {}).sort(), [
      'CreatedAt',
      'Description',
      'ID',
      'Spec',
      'Status',
      'UpdatedAt',
      'Version',
    ]);
    await m.dockerOk(['network', 'create', '-d', 'overlay', '--attachable', 'dov']);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'dweb',
      '--network',
      'dov',
      '--constraint',
      'node.hostname==dphost2',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo dp-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'dclient',
      '--network',
      'dov',
      '--constraint',
      'node.hostname==dphost1',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const client = await runningTaskContainer(m, 'dclient');
    const web = await runningTaskContainer(w, 'dweb');
    const before1 = await vxlanOut(1);
    // on a failure: what the client sees, the FDB on both hosts, the counters
    const diag = async () => {
      const [ns] = await overlayNamespaces(m);
      const [ns2] = await overlayNamespaces(w);
      const out = [
        JSON.stringify(await m.docker(['exec', client, 'nslookup', 'dweb'])),
        ns ? (await runCommand('bridge', ['-n', ns, 'fdb', 'show'])).stdout : 'no overlay on host 1',
        ns2 ? (await runCommand('bridge', ['-n', ns2, 'fdb', 'show'])).stdout : 'no overlay on host 2',
        JSON.stringify(await vxlanOut(1)),
        JSON.stringify(await vxlanOut(2)),
      ];
      return out.join('\n---\n');
    };
    const body = await until('HTTP from host 2 by the service name (its VIP)', 30_000, async () => {
      const r = await m.docker([
        'exec',
        client,
        'sh',
        '-c',
        "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 dweb 8080",
      ]);
      return /dp-[0-9a-f]{12}/.exec(r.stdout)?.[0];
    }).catch(async (err: unknown) => assert.fail(`${String(err)}\n${await diag()}`));
    assert.equal(body, `dp-${web.slice(0, 12)}`);
    // the encapsulated traffic left by the data-path link alone, on both hosts
    const after1 = await vxlanOut(1);
    const after2 = await vxlanOut(2);
    assert.ok(after1.dp0 > before1.dp0, `host 1 sent VXLAN by dp0 (${JSON.stringify(after1)})`);
    assert.ok(after2.dp0 > 0, `host 2 sent VXLAN by dp0 (${JSON.stringify(after2)})`);
    assert.equal(after1.eth0, 0, 'no VXLAN by the advertise link on host 1');
    assert.equal(after2.eth0, 0, 'no VXLAN by the advertise link on host 2');

    // the FDB entries point at the other node's data-path address
    const [ns1] = await overlayNamespaces(m);
    assert.ok(ns1, 'host 1 has the overlay plumbed');
    const fdb = (await runCommand('bridge', ['-n', ns1, 'fdb', 'show'])).stdout;
    assert.match(fdb, new RegExp(`dst ${dataBlock.replaceAll('.', '\\.')}\\.2 `), fdb);
    assert.doesNotMatch(fdb, /dst 192\.168\.203\./, fdb);
    const vx = (await runCommand('ip', ['-n', ns1, '-d', 'link', 'show', 'type', 'vxlan'])).stdout;
    assert.match(vx, new RegExp(`local ${dataBlock.replaceAll('.', '\\.')}\\.1 `), vx);

    // inspect on host 1 (a manager with a task there): its container, both peers
    const [clientTask] = JSON.parse(await m.dockerOk(['inspect', '--type', 'container', client])) as Array<{
      Name: string;
    }>;
    const n1 = await inspectNetwork(m, 'dov');
    assert.deepEqual(n1.Peers, [
      { Name: 'dphost1', IP: net.address(1) },
      { Name: 'dphost2', IP: net.address(2) },
    ]);
    const own = n1.Containers?.[client];
    assert.ok(own, `host 1 shows its task container: ${JSON.stringify(n1.Containers)}`);
    assert.equal(own.Name, clientTask?.Name.replace(/^\//, ''));
    assert.match(own.EndpointID, /^[0-9a-f]{64}$/);
    assert.match(own.IPv4Address, /^10\.0\.\d+\.\d+\/24$/);
    assert.match(own.MacAddress, /^02:42:0a:00:[0-9a-f]{2}:[0-9a-f]{2}$/);
    assert.equal(own.IPv6Address, '');
    assert.equal(Object.keys(n1.Containers ?? {}).length, 1, 'only the local containers');
    assert.deepEqual(n1.Labels, {}, "dockerd's local view: {} rather than null");
    // on host 2 (a worker): its own task alone
    const n2 = await inspectNetwork(w, 'dov');
    assert.deepEqual(Object.keys(n2.Containers ?? {}), [web]);
    assert.deepEqual(n2.Peers, n1.Peers);
    // a plain container attached there: listed with its own endpoint
    const plain = await w.dockerOk([
      'run',
      '-d',
      '--name',
      'dplain',
      '--network',
      'dov',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const [plainView] = JSON.parse(await w.dockerOk(['inspect', plain])) as Array<{
      NetworkSettings: { Networks: Record<string, { EndpointID: string; IPAddress: string }> };
    }>;
    const plainEp = plainView?.NetworkSettings.Networks.dov;
    const withPlain = await inspectNetwork(w, 'dov');
    assert.deepEqual(withPlain.Containers?.[plain], {
      Name: 'dplain',
      EndpointID: plainEp?.EndpointID,
      MacAddress: withPlain.Containers?.[plain]?.MacAddress,
      IPv4Address: `${plainEp?.IPAddress}/24`,
      IPv6Address: '',
    });
    assert.equal(Object.keys(withPlain.Containers ?? {}).length, 2);
    await w.dockerOk(['rm', '-f', plain]);

    // the client gone: the manager has no task on it, and shows neither containers nor peers
    await m.dockerOk(['service', 'rm', 'dclient']);
    await until('the overlay gone from host 1', 30_000, async () =>
      (await overlayNamespaces(m)).length === 0 ? true : undefined,
    );
    const gone = await inspectNetwork(m, 'dov');
    assert.equal(gone.Containers, null);
    assert.equal(gone.Peers, undefined);
    assert.equal(gone.Labels, null);
    await m.dockerOk(['service', 'rm', 'dweb']);
    await until('the overlay gone from host 2', 30_000, async () =>
      (await overlayNamespaces(w)).length === 0 ? true : undefined,
    );
    await m.dockerOk(['network', 'rm', 'dov']);
  });
});
