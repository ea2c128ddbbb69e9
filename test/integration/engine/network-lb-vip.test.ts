import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isKind } from '../../../src/common/errors.js';
import { HostNftOps, type NftOps } from '../../../src/engine/network/lb/nft.ops.js';
import { NftServiceLb } from '../../../src/engine/network/lb/service-lb.js';
import { VIP_TABLE } from '../../../src/engine/network/lb/vip-rules.js';
import { requireTool } from '../../helpers/process.js';
import { LbNetwork, tally } from './network-lb-fixture.js';

/** Counts the nft runs (the cost of applies), running them for real. */
class CountingNft implements NftOps {
  runs = 0;
  private readonly real = new HostNftOps();
  run(netns: string | undefined, script: string): Promise<void> {
    this.runs++;
    return this.real.run(netns, script);
  }
  tables(netns: string | undefined): Promise<string[]> {
    return this.real.tables(netns);
  }
}

/**
 * Service VIPs in "task" namespaces on a stand-in overlay (network-lb-fixture.ts): new
 * connections to the VIP, TCP and UDP, spread over the backends round robin, the client itself
 * among them (hairpin); backends removed and added; a VIP with none refused at once; one nft run
 * per change and none without one.
 */
describe('service VIP load balancing in a container namespace', () => {
  let net: LbNetwork;
  const nft = new CountingNft();
  const lb = new NftServiceLb(nft);
  let vip = '';
  let empty = '';
  let all: string[] = [];
  let t1 = '';

  before(async () => {
    requireTool('nft', "bash scripts/install-deps.sh installs Debian's nftables");
    net = await LbNetwork.create(3);
    vip = `${net.overlay}.100`;
    empty = `${net.overlay}.101`;
    all = [1, 2, 3].map((i) => net.taskIp(i));
    t1 = net.path(net.tasks[0] ?? '');
  });
  after(async () => {
    await net?.destroy();
  });

  it('spreads new TCP and UDP connections over every backend, the client itself included', async () => {
    await lb.apply(t1, [
      { vip, backends: all },
      { vip: empty, backends: [] },
    ]);
    const tcp = await net.requests(net.tasks[0] ?? '', 'tcp', vip, 80, 6);
    assert.deepEqual(tally(tcp), { t1: 2, t2: 2, t3: 2 }, tcp.join(','));
    const udp = await net.requests(net.tasks[0] ?? '', 'udp', vip, 5353, 6);
    assert.deepEqual(tally(udp), { t1: 2, t2: 2, t3: 2 }, udp.join(','));
    // the other tasks have no table: the VIP is nobody's address there
    assert.deepEqual(await nft.tables(net.path(net.tasks[1] ?? '')), []);
  });

  it('refuses a VIP with no backend at once', async () => {
    const [tcp] = await net.requests(net.tasks[0] ?? '', 'tcp', empty, 80, 1);
    assert.match(tcp ?? '', /^ERR ECONNREFUSED \d+$/);
    assert.ok(Number(tcp?.split(' ')[2]) < 1000, tcp);
    const [udp] = await net.requests(net.tasks[0] ?? '', 'udp', empty, 5353, 1);
    assert.match(udp ?? '', /^ERR ECONNREFUSED \d+$/);
  });

  it('follows backends removed and added, and runs nft only when the table changes', async () => {
    const before = nft.runs;
    await lb.apply(t1, [
      { vip: empty, backends: [] },
      { vip, backends: [...all].reverse() },
    ]);
    assert.equal(nft.runs, before, 'the same table in another order: no nft run');

    await lb.apply(t1, [{ vip, backends: [net.taskIp(2), net.taskIp(3)] }]);
    assert.equal(nft.runs, before + 1);
    const two = await net.requests(net.tasks[0] ?? '', 'tcp', vip, 80, 4);
    assert.deepEqual(tally(two), { t2: 2, t3: 2 }, two.join(','));

    await lb.apply(t1, [{ vip, backends: [net.taskIp(1)] }]);
    assert.deepEqual(tally(await net.requests(net.tasks[0] ?? '', 'tcp', vip, 80, 3)), { t1: 3 });

    await lb.apply(t1, [{ vip, backends: all }]);
    const three = await net.requests(net.tasks[0] ?? '', 'tcp', vip, 80, 6);
    assert.deepEqual(tally(three), { t1: 2, t2: 2, t3: 2 }, three.join(','));
    assert.equal(nft.runs, before + 3);
  });

  it('keeps answering while the table is replaced (no window without rules)', async () => {
    const t2 = net.path(net.tasks[1] ?? '');
    await lb.apply(t2, [{ vip, backends: all }]);
    let done = false;
    const load = net.requests(net.tasks[1] ?? '', 'tcp', vip, 80, 200).finally(() => {
      done = true;
    });
    let applies = 0;
    for (let i = 0; i < 500 && !done; i++) {
      const backends = i % 2 ? all : [net.taskIp(1), net.taskIp(3)];
      await lb.apply(t2, [{ vip, backends }]);
      applies++;
    }
    assert.ok(applies >= 4, `the table was replaced ${applies} times during the requests`);
    const answers = await load;
    assert.deepEqual(
      answers.filter((a) => !/^t[123]$/.test(a)),
      [],
      'every connection answered',
    );
    await lb.clear(t2);
  });

  it("works on a namespace given as a process's /proc/<pid>/ns/net (how the agent names a task's)", async () => {
    const key = `/proc/${net.serverPid(3)}/ns/net`;
    await lb.apply(key, [{ vip, backends: [net.taskIp(1), net.taskIp(2)] }]);
    const answers = await net.requests(net.tasks[2] ?? '', 'tcp', vip, 80, 4);
    assert.deepEqual(tally(answers), { t1: 2, t2: 2 }, answers.join(','));
    const runs = nft.runs;
    await lb.apply(key, [{ vip, backends: [net.taskIp(2), net.taskIp(1)] }]);
    assert.equal(nft.runs, runs);
    await lb.clear(key);
    assert.deepEqual(await nft.tables(net.path(net.tasks[2] ?? '')), []);
  });

  it('clears the table, and tells a namespace that is gone', async () => {
    await lb.clear(t1);
    assert.deepEqual(
      (await nft.tables(t1)).filter((t) => t.includes(VIP_TABLE)),
      [],
    );
    await lb.clear(t1); // again: nothing to do, no error
    await assert.rejects(lb.apply('/run/netns/no-such-namespace-here', [{ vip, backends: all }]), (err) =>
      isKind(err, 'NotFound'),
    );
    await lb.clear('/run/netns/no-such-namespace-here');
    await assert.rejects(lb.apply(t1, [{ vip: 'x', backends: [] }]), (err) =>
      isKind(err, 'InvalidParameter'),
    );
  });
});
