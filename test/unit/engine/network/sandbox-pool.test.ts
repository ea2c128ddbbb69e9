import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EventsService } from '../../../../src/engine/events/events.service.js';
import { createNetworkService, type NetworkService } from '../../../../src/engine/network/network.service.js';
import type { AttachRequest, Endpoint } from '../../../../src/engine/network/network.types.js';
import {
  POOL_IDLE_MS,
  POOL_SIZE,
  REFILL_DELAY_MS,
  SandboxPool,
} from '../../../../src/engine/network/sandbox-pool.js';
import { eventually } from '../../../helpers/eventually.js';
import { FakeCni, FakeNetns, fakeNetworkOps, quietLog } from './fakes.js';

/**
 * The sandbox pool through the network service, with fake plugins and namespaces: pooled
 * sandboxes hold the addresses IPAM hands out next, a start takes one without running anything,
 * and the addresses, MACs and releases are what they are without a pool.
 */

let dir: string;
const made: NetworkService[] = [];
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-pool-unit-'));
});
after(async () => {
  for (const s of made) await s.close();
  await rm(dir, { recursive: true, force: true });
});

let count = 0;
async function make(poolSize?: number) {
  const root = join(dir, `e${count++}`);
  const cni = new FakeCni();
  const netns = new FakeNetns();
  const service = await createNetworkService({
    dataRoot: join(root, 'data'),
    execRoot: join(root, 'exec'),
    bridge: 'berth0',
    events: new EventsService(),
    log: quietLog(),
    ops: fakeNetworkOps(cni, netns),
    lockPath: join(root, 'lock'),
    ...(poolSize !== undefined ? { poolSize } : {}),
  });
  made.push(service);
  // the engine's start sweeps before containers start: the pool serves from then on
  await service.sweep();
  const ipam = join(root, 'data', 'network', 'ipam', 'berth0');
  const files = async () => (await readdir(ipam).catch(() => [] as string[])).filter((f) => f.includes('.'));
  return { service, cni, netns, root, files, ipamDir: ipam };
}

async function start(service: NetworkService, req: Partial<AttachRequest> = {}): Promise<Endpoint> {
  const [ep] = await service.attach([{ network: 'bridge', ...req }]).endpoints;
  if (!ep) throw new Error('no endpoint');
  return ep;
}

function stop(service: NetworkService, ep: Endpoint): Promise<void> {
  return service.release({
    sandboxId: ep.sandboxId,
    sandboxKey: ep.sandboxKey,
    plumbed: ep.bridge ? [{ ifname: 'eth0', bridge: ep.bridge, addresses: [ep.ipAddress] }] : [],
  });
}

const adds = (cni: FakeCni) => cni.calls.filter((c) => c.command === 'ADD');

describe('sandbox pool', () => {
  it('fills after a start with the next addresses; a start takes one without running a plugin', async () => {
    const { service, cni, netns, files, ipamDir } = await make();
    const first = await start(service);
    assert.equal(first.ipAddress, '172.18.0.2');
    await eventually('the pool to fill', async () => (await files()).length === 1 + POOL_SIZE);
    assert.deepEqual((await files()).sort(), ['172.18.0.2', '172.18.0.3', '172.18.0.4']);
    // each pooled sandbox was plumbed with its address and dockerd's MAC for it (whatever was
    // plumbed and dropped on the way, if the first start's pick came after the pool's)
    for (const [ip, mac] of [
      ['172.18.0.3', '02:42:ac:12:00:03'],
      ['172.18.0.4', '02:42:ac:12:00:04'],
    ]) {
      const owner = (await readFile(join(ipamDir, ip ?? ''), 'utf8')).split('\r\n')[0];
      assert.equal(
        adds(cni).find((c) => c.containerId === owner)?.args,
        `IgnoreUnknown=1;IP=${ip};MAC=${mac}`,
      );
    }
    const before = {
      adds: adds(cni).length,
      creates: netns.calls.filter((c) => c.startsWith('create')).length,
    };
    const att = service.attach([{ network: 'bridge' }]);
    const [second] = await att.endpoints;
    assert.equal(second?.ipAddress, '172.18.0.3');
    assert.equal(second?.sandboxKey, att.sandboxKey);
    assert.equal(adds(cni).length, before.adds, 'no ADD on the hand-off');
    assert.equal(
      netns.calls.filter((c) => c.startsWith('create')).length,
      before.creates,
      'no namespace made',
    );
    assert.equal(second?.gateway, '172.18.0.1');
    assert.equal(second?.bridge?.name, 'berth0');
    assert.match(second?.endpointId ?? '', /^[0-9a-f]{64}$/);
  });

  it('gives the addresses a start gets without a pool, whatever the order of starts and releases', async () => {
    const withPool = await make();
    const without = await make(0);
    // a fixed pseudo-random sequence of starts (some with a static MAC) and releases
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const ops: Array<{ op: 'start'; mac?: string } | { op: 'stop'; index: number }> = [];
    let running = 0;
    for (let i = 0; i < 40; i++) {
      if (running > 0 && rand(3) === 0) {
        ops.push({ op: 'stop', index: rand(running) });
        running--;
      } else {
        ops.push({ op: 'start', ...(rand(5) === 0 ? { mac: '02:00:00:00:ab:cd' } : {}) });
        running++;
      }
    }
    const runs = await Promise.all(
      [withPool, without].map(async ({ service }, which) => {
        const seen: string[] = [];
        const live: Endpoint[] = [];
        for (const [i, op] of ops.entries()) {
          if (op.op === 'start') {
            const ep = await start(service, op.mac ? { macAddress: op.mac } : {});
            seen.push(`${ep.ipAddress} ${op.mac ?? ''}`);
            live.push(ep);
          } else {
            const [ep] = live.splice(op.index, 1);
            if (ep) await stop(service, ep);
          }
          // let the pool work in between now and then (it must not matter)
          if (which === 0 && i % 4 === 3) await new Promise((r) => setTimeout(r, 230));
        }
        return seen;
      }),
    );
    assert.deepEqual(runs[0], runs[1]);
    assert.ok(new Set(runs[0]).size > 5);
  });

  it('honours a static address and a MAC asked for: taken from the pool, or the pooled sandbox gives it up', async () => {
    const { service, cni, netns, files } = await make();
    await start(service);
    await eventually('the pool to fill', async () => (await files()).length === 3);
    const pooled = adds(cni).slice(1);
    const at4 = pooled.find((c) => c.args?.includes('IP=172.18.0.4'));
    // the static address a pooled sandbox holds: that sandbox, nothing run
    const n = adds(cni).length;
    const stat = await start(service, { ipv4Address: '172.18.0.4' });
    assert.equal(stat.ipAddress, '172.18.0.4');
    assert.equal(stat.sandboxId, at4?.containerId);
    assert.equal(adds(cni).length, n);
    // a MAC of its own: the pooled sandbox holding .3 goes, the start plumbs .3 with that MAC
    const at3 = pooled.find((c) => c.args?.includes('IP=172.18.0.3'));
    const own = await start(service, { macAddress: '02:00:00:00:00:99' });
    assert.equal(own.ipAddress, '172.18.0.3');
    assert.notEqual(own.sandboxId, at3?.containerId);
    assert.equal(
      adds(cni).find((c) => c.containerId === own.sandboxId)?.args,
      'IgnoreUnknown=1;IP=172.18.0.3;MAC=02:00:00:00:00:99',
    );
    assert.ok(!netns.live.has(at3?.netns ?? ''), 'the pooled namespace is gone');
  });

  it('is made up again when an address is freed, holding the lowest free ones', async () => {
    const { service, files } = await make();
    const a = await start(service);
    await eventually('the pool to fill', async () => (await files()).length === 3);
    const b = await start(service);
    assert.equal(b.ipAddress, '172.18.0.3');
    await eventually('the pool made up', async () => (await files()).length === 4);
    // .2 freed: the pool holds .2 and .4 (.5 dropped), and the next start gets .2 from it
    await stop(service, a);
    await eventually('the pool on the lowest free', async () => {
      const f = (await files()).sort();
      return f.join() === ['172.18.0.2', '172.18.0.3', '172.18.0.4'].join();
    });
    const c = await start(service);
    assert.equal(c.ipAddress, '172.18.0.2');
  });

  it('is drained at engine shutdown: no namespace, no address left', async () => {
    const { service, netns, files } = await make();
    const a = await start(service);
    await eventually('the pool to fill', async () => (await files()).length === 3);
    await stop(service, a);
    await service.close();
    assert.deepEqual(await files(), []);
    assert.deepEqual([...netns.live], []);
  });

  it('serves a user-defined network once it is busy, and is drained when the network goes', async () => {
    const { service, cni, netns } = await make();
    await service.create({ Name: 'busy', IPAM: { Config: [{ Subnet: '10.77.0.0/24' }] } });
    const onBusy = () => adds(cni).filter((c) => c.config.name !== 'berth0');
    const a = await start(service, { network: 'busy' });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(onBusy().length, 1, 'one start does not make a user-defined network busy');
    const b = await start(service, { network: 'busy' });
    assert.equal(b.ipAddress, '10.77.0.3');
    const pooledAt = (ip: string) =>
      onBusy().find((x) => x.args?.includes(`IP=${ip};`) && x.containerId !== b.sandboxId);
    await eventually(
      'the pool to fill',
      () => pooledAt('10.77.0.4') !== undefined && pooledAt('10.77.0.5') !== undefined,
    );
    const c = await start(service, { network: 'busy' });
    assert.equal(c.ipAddress, '10.77.0.4');
    assert.equal(c.sandboxId, pooledAt('10.77.0.4')?.containerId, 'taken from the pool');
    for (const ep of [a, b, c]) await stop(service, ep);
    const pooledKeys = onBusy().map((x) => x.netns);
    assert.ok(
      pooledKeys.some((k) => netns.live.has(k)),
      'pooled sandboxes before the removal',
    );
    await service.remove('busy');
    assert.deepEqual(
      pooledKeys.filter((k) => netns.live.has(k)),
      [],
      'every namespace plumbed into the network removed',
    );
  });

  it('hands out an address being released at once (a start waits for that release, as dockerd releases before rm answers)', async () => {
    const { service, netns, cni } = await make(0);
    const remove = netns.remove.bind(netns);
    netns.remove = async (path: string) => {
      await new Promise((r) => setTimeout(r, 150));
      await remove(path);
    };
    await service.create({ Name: 'static', IPAM: { Config: [{ Subnet: '10.78.0.0/24' }] } });
    const a = await start(service);
    const s1 = await start(service, { network: 'static', ipv4Address: '10.78.0.9' });
    const releasing = [stop(service, a), stop(service, s1)];
    const b = await start(service);
    assert.equal(b.ipAddress, a.ipAddress, 'the lowest free address, as without the lazy release');
    const s2 = await start(service, { network: 'static', ipv4Address: '10.78.0.9' });
    assert.equal(s2.ipAddress, '10.78.0.9', 'a static address is reusable at once');
    await Promise.all(releasing);
    // the new sandboxes' ADDs ran after the old ones' addresses were released
    assert.equal(adds(cni).length, 4);
    assert.ok(netns.live.has(b.sandboxKey) && netns.live.has(s2.sandboxKey));
  });

  it("plumbs a start whose pooled sandbox's ADD failed half-way (its veth left behind) with an ADD of its own", async () => {
    const { service, cni, files, ipamDir } = await make();
    await start(service);
    await eventually('the pool to fill', async () => (await files()).length === 1 + POOL_SIZE);
    // the pool's next ADD (of .5) waits, and finds .5 held by a container the engine does not
    // know: IPAM fails after the plugin made the veth pair, as the bridge plugin does
    let open = (): void => undefined;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    let waiting = false;
    const exec = cni.exec.bind(cni);
    cni.exec = async (plugin, call) => {
      if (call.command === 'ADD' && call.args?.includes('IP=172.18.0.5;') && !waiting) {
        waiting = true;
        await gate;
      }
      return exec(plugin, call);
    };
    await writeFile(join(ipamDir, '172.18.0.5'), 'someone-else\r\neth0');
    const a = await start(service);
    assert.equal(a.ipAddress, '172.18.0.3');
    await eventually('the pool to plumb .5', async () => waiting);
    const b = await start(service);
    assert.equal(b.ipAddress, '172.18.0.4');
    // this start takes the pooled sandbox of .5 while its ADD is under way
    const att = service.attach([{ network: 'bridge' }]);
    open();
    const [c] = await att.endpoints;
    assert.equal(c?.sandboxKey, att.sandboxKey);
    assert.equal(c?.ipAddress, '172.18.0.6', 'the address a start gets without a pool (.5 is held)');
    assert.equal(cni.links.get(att.sandboxKey)?.size, 1, 'one eth0 in the namespace');
    const owner = (await readFile(join(ipamDir, '172.18.0.6'), 'utf8')).split('\r\n')[0];
    assert.equal(owner, att.sandboxId);
  });

  it('serves concurrent starts and releases without handing an address out twice', async () => {
    const { service, cni, netns } = await make();
    // the host's calls take a while, in no fixed order
    let tick = 0;
    const later = () => new Promise((r) => setTimeout(r, (tick++ * 7) % 6));
    const exec = cni.exec.bind(cni);
    cni.exec = async (plugin, call) => {
      await later();
      return exec(plugin, call);
    };
    const remove = netns.remove.bind(netns);
    netns.remove = async (path) => {
      await later();
      await remove(path);
    };
    const failures: string[] = [];
    const worker = async (w: number) => {
      for (let i = 0; i < 25; i++) {
        try {
          const ep = await start(service, i % 5 === w ? { macAddress: '02:00:00:00:00:77' } : {});
          await new Promise((r) => setTimeout(r, (i * 7 + w * 13) % 30));
          await stop(service, ep);
        } catch (err) {
          failures.push(String(err));
        }
      }
    };
    await Promise.all([0, 1, 2, 3].map((w) => worker(w)));
    assert.deepEqual(failures, []);
    assert.ok(adds(cni).length > 0);
  });
});

describe('sandbox pool bookkeeping', () => {
  /** A pool over pretend sandboxes: made and discarded at once, addresses from a counter. */
  function fakePool(size = POOL_SIZE) {
    const made: string[] = [];
    const discarded: string[] = [];
    let next = 0;
    const free = ['10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5'];
    const pool = new SandboxPool(
      {
        newSandbox: () => ({ sandboxId: `s${next++}`, sandboxKey: `/ns/s${next}`, ready: Promise.resolve() }),
        nextAddresses: (_id, count) => free.slice(0, count),
        plumb: (s, networkId, ip) => {
          made.push(ip);
          return {
            ...s,
            networkId,
            ip,
            plumbing: { name: 'br', cniName: 'br', subnet: '10.0.0.0/24', gateway: '10.0.0.1' },
            plumbed: Promise.resolve({ ipAddress: ip, prefixLen: 24, gateway: '10.0.0.1', macAddress: '' }),
          };
        },
        discard: async (e) => {
          discarded.push(e.ip);
        },
        warn: () => undefined,
      },
      size,
    );
    pool.enabled = true;
    return { pool, made, discarded, free };
  }

  it('fills a moment after a start, on a user network from its second start; drains when idle', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { pool, made, discarded } = fakePool();
    pool.noteStart('user', true);
    t.mock.timers.tick(REFILL_DELAY_MS + 1);
    assert.deepEqual(made, [], 'one start does not make a user network busy');
    pool.refill('user');
    assert.deepEqual(made, [], 'nor does a release after it');
    pool.noteStart('user', true);
    t.mock.timers.tick(REFILL_DELAY_MS - 1);
    assert.deepEqual(made, [], 'not while the start needs the CPU');
    t.mock.timers.tick(2);
    assert.deepEqual(made, ['10.0.0.2', '10.0.0.3']);
    assert.equal(pool.of('user').length, POOL_SIZE);
    t.mock.timers.tick(POOL_IDLE_MS);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(pool.of('user'), []);
    assert.deepEqual(discarded.sort(), ['10.0.0.2', '10.0.0.3']);
    // idle: a release does not make it up again
    pool.refill('user');
    assert.equal(pool.of('user').length, 0);
    await pool.close(async () => undefined);
  });

  it('keeps the lowest free addresses: a higher one is dropped when a lower one is freed', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { pool, made, discarded, free } = fakePool();
    pool.noteStart('bridge', false);
    t.mock.timers.tick(REFILL_DELAY_MS + 1);
    assert.deepEqual(made, ['10.0.0.2', '10.0.0.3']);
    assert.equal(pool.take('bridge', '10.0.0.2')?.ip, '10.0.0.2');
    free.splice(0, 1); // .2 is a container's now
    pool.refill('bridge');
    assert.deepEqual(made, ['10.0.0.2', '10.0.0.3', '10.0.0.4']);
    free.unshift('10.0.0.2'); // and released again: .2 and .3 are the lowest free
    pool.refill('bridge');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(discarded, ['10.0.0.4']);
    assert.deepEqual(
      pool
        .of('bridge')
        .map((e) => e.ip)
        .sort(),
      ['10.0.0.2', '10.0.0.3'],
    );
    await pool.close(async () => undefined);
    assert.deepEqual(discarded.sort(), ['10.0.0.2', '10.0.0.3', '10.0.0.4']);
  });
});
