import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ingressSandboxPath, NftIngressMesh } from '../../../../../src/engine/network/lb/ingress-mesh.js';
import type { IngressPort } from '../../../../../src/engine/network/lb/lb.types.js';
import { FakeLinks, FakeNetns, FakeNft, FakeSockets } from './fakes.js';

function fixture() {
  const nft = new FakeNft();
  const links = new FakeLinks();
  const netns = new FakeNetns(links);
  const sockets = new FakeSockets();
  const warnings: string[] = [];
  const log = {
    warn: (msg: string, fields?: Record<string, unknown>) => warnings.push(`${msg} ${fields?.port}`),
  };
  const make = () =>
    new NftIngressMesh({
      sandboxPath: '/exec/netns/ingress_sbox',
      hostLink: 'bing0',
      nft,
      links,
      netns,
      sockets,
      log,
    });
  return { nft, links, netns, sockets, warnings, make };
}

const ports: IngressPort[] = [
  { protocol: 'tcp', publishedPort: 8080, targetPort: 80, backends: ['10.0.0.5'] },
];

describe('NftIngressMesh', () => {
  it('makes the sandbox once: its link to the host, routes, forwarding, loopback on the link', async () => {
    const f = fixture();
    const m = f.make();
    assert.deepEqual(await m.ensureSandbox(), { sandboxKey: '/exec/netns/ingress_sbox' });
    assert.deepEqual(await m.ensureSandbox(), { sandboxKey: '/exec/netns/ingress_sbox' });
    assert.deepEqual(f.netns.calls, ['remove /exec/netns/ingress_sbox', 'create /exec/netns/ingress_sbox']);
    assert.deepEqual(
      f.links.calls.filter((c) => c.startsWith('ip ')),
      [
        'ip host: link add bing0 type veth peer name host0 netns /exec/netns/ingress_sbox; addr add 169.254.239.241/30 dev bing0; link set bing0 up',
        'ip /exec/netns/ingress_sbox: addr add 169.254.239.242/30 dev host0; link set host0 up; route add default via 169.254.239.241 dev host0',
      ],
    );
    assert.equal(f.links.sysctls.get('host:net/ipv4/conf/bing0/route_localnet'), '1');
    assert.equal(f.links.sysctls.get('/exec/netns/ingress_sbox:net/ipv4/ip_forward'), '1');
    assert.deepEqual(
      f.nft.runs.map((r) => r.netns),
      ['host', '/exec/netns/ingress_sbox'],
      'the old host table removed, the sandbox fenced',
    );
    assert.deepEqual(f.links.forward, [
      '-A FORWARD -o bing0 -m comment --comment "berth ingress bing0" -j ACCEPT',
      '-A FORWARD -i bing0 -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment "berth ingress bing0" -j ACCEPT',
      '-A FORWARD -j OTHER',
    ]);
    assert.equal(f.links.calls.filter((c) => c.startsWith('restore')).length, 1);
    await f.make().ensureSandbox();
    assert.equal(
      f.links.calls.filter((c) => c.startsWith('restore')).length,
      1,
      'rules in place: no restore',
    );
  });

  it('writes the sandbox before the host, and each only when it changes', async () => {
    const f = fixture();
    const m = f.make();
    await m.apply(ports);
    const after = f.nft.runs.length;
    assert.deepEqual(
      f.nft.runs.slice(-2).map((r) => r.netns),
      ['/exec/netns/ingress_sbox', 'host'],
    );
    await m.apply(ports);
    assert.equal(f.nft.runs.length, after);
    await m.apply([{ ...ports[0], backends: ['10.0.0.6'] } as IngressPort]);
    assert.deepEqual(
      f.nft.runs.slice(after).map((r) => r.netns),
      ['/exec/netns/ingress_sbox'],
      'only the sandbox changes when the backends do',
    );
  });

  it('adopts a whole sandbox after a restart and rebuilds a broken one', async () => {
    const f = fixture();
    await f.make().apply(ports);
    const made = f.netns.calls.length;
    const next = f.make(); // a new engine: nothing in memory
    await next.ensureSandbox();
    assert.equal(f.netns.calls.length, made, 'kept');
    await next.apply(ports);
    assert.deepEqual(
      f.nft.runs.slice(-2).map((r) => r.netns),
      ['/exec/netns/ingress_sbox', 'host'],
      'its tables written once, as nothing is known of them',
    );

    f.links.links.delete('/exec/netns/ingress_sbox/host0');
    await f.make().ensureSandbox();
    assert.deepEqual(f.netns.calls.slice(made), [
      'remove /exec/netns/ingress_sbox',
      'create /exec/netns/ingress_sbox',
    ]);
  });

  it('removes table, link and namespace, also those a crashed engine left', async () => {
    const f = fixture();
    await f.make().apply(ports);
    await f.make().remove();
    assert.deepEqual(f.links.forward, ['-A FORWARD -j OTHER']);
    assert.deepEqual(f.links.links, new Set());
    assert.deepEqual(f.links.namespaces, new Set());
    assert.match(f.nft.runs.at(-1)?.script ?? '', /^table ip bing0\ndelete table ip bing0\n$/);

    await f.make().apply(ports);
    f.nft.failNext = true;
    await assert.rejects(f.make().remove(), /nft: failed/);
    assert.deepEqual(f.links.links, new Set(), 'the steps after a failed one still ran');
    assert.deepEqual(f.links.namespaces, new Set());
  });

  it('holds the published ports in its own namespace, warns about one taken, lets them go', async () => {
    const f = fixture();
    const m = f.make();
    f.sockets.taken.add('53/udp');
    await m.apply([...ports, { protocol: 'udp', publishedPort: 53, targetPort: 53, backends: [] }]);
    assert.deepEqual([...f.sockets.held], ['8080/tcp']);
    assert.deepEqual(f.warnings, ['cannot hold an ingress-published port (its rules still carry it) 53/udp']);
    await m.apply([{ protocol: 'tcp', publishedPort: 9000, targetPort: 80, backends: [] }]);
    assert.deepEqual([...f.sockets.held], ['9000/tcp']);
    await m.remove();
    assert.deepEqual([...f.sockets.held], []);

    const other = new FakeSockets();
    const inNamespace = new NftIngressMesh({
      sandboxPath: '/exec/netns/ingress_sbox',
      hostNetns: '/run/netns/node',
      nft: f.nft,
      links: f.links,
      netns: f.netns,
      sockets: other,
    });
    await inNamespace.apply(ports);
    assert.deepEqual([...other.held], [], 'no socket can bind in another namespace');
  });

  it('binds the sandbox outside the directory of swept container namespaces', () => {
    assert.equal(ingressSandboxPath('/run/berth'), '/run/berth/lb/ingress_sbox');
  });

  it('makes no sandbox for an empty set of ports', async () => {
    const f = fixture();
    await f.make().apply([]);
    assert.deepEqual(f.netns.calls, []);
    assert.deepEqual(
      f.nft.runs.map((r) => r.netns),
      ['host'],
    );
  });
});
