import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isKind } from '../../../../../src/common/errors.js';
import { NftServiceLb } from '../../../../../src/engine/network/lb/service-lb.js';
import { FakeNft } from './fakes.js';

/** Namespaces by path → identity; a missing path is a namespace that is gone. */
function namespaces(initial: Record<string, string>) {
  const ids = new Map(Object.entries(initial));
  return { ids, identify: async (path: string) => ids.get(path) };
}

const A = [{ vip: '10.0.0.100', backends: ['10.0.0.2', '10.0.0.3'] }];
const B = [{ vip: '10.0.0.100', backends: ['10.0.0.2'] }];

describe('NftServiceLb', () => {
  it('runs nft once per change of a namespace table and never when it is unchanged', async () => {
    const nft = new FakeNft();
    const ns = namespaces({ '/ns/a': '1:10', '/ns/b': '1:11' });
    const lb = new NftServiceLb(nft, ns.identify);
    await lb.apply('/ns/a', A);
    await lb.apply('/ns/a', [{ vip: '10.0.0.100', backends: ['10.0.0.3', '10.0.0.2'] }]);
    await lb.apply('/ns/b', A);
    await lb.apply('/ns/a', B);
    await lb.apply('/ns/a', B);
    assert.deepEqual(
      nft.runs.map((r) => r.netns),
      ['/ns/a', '/ns/b', '/ns/a'],
    );
    assert.match(nft.runs[2]?.script ?? '', /ip daddr 10.0.0.100 dnat to 10.0.0.2\n/);
  });

  it('writes again into a new namespace at the same path, and after a failed run', async () => {
    const nft = new FakeNft();
    const ns = namespaces({ '/ns/a': '1:10' });
    const lb = new NftServiceLb(nft, ns.identify);
    await lb.apply('/ns/a', A);
    ns.ids.set('/ns/a', '1:99'); // the container was replaced: same path, another namespace
    await lb.apply('/ns/a', A);
    assert.equal(nft.runs.length, 2);
    nft.failNext = true;
    await assert.rejects(lb.apply('/ns/a', B));
    await lb.apply('/ns/a', B);
    assert.equal(nft.runs.length, 3, 'the failed write is not taken as done');
  });

  it('writes the calls for one namespace in order, skipping those overtaken while they waited', async () => {
    const nft = new FakeNft();
    const ns = namespaces({ '/ns/a': '1:10' });
    const lb = new NftServiceLb(nft, ns.identify);
    await Promise.all([lb.apply('/ns/a', A), lb.apply('/ns/a', B), lb.clear('/ns/a'), lb.apply('/ns/a', B)]);
    assert.equal(nft.runs.length, 2, 'A, then the last asked for (B); the rest overtaken');
    assert.match(nft.runs[1]?.script ?? '', /dnat to 10.0.0.2\n/);

    const results = await Promise.allSettled([
      lb.apply('/ns/a', A),
      lb.apply('/ns/gone', A),
      lb.clear('/ns/a'),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.match(nft.runs.at(-1)?.script ?? '', /^table ip berth-vip\ndelete table ip berth-vip\n$/);
  });

  it('runs at most `parallel` nft processes at once', async () => {
    let now = 0;
    let most = 0;
    const slow = new FakeNft();
    slow.run = async (netns, script) => {
      now++;
      most = Math.max(most, now);
      await new Promise((r) => setTimeout(r, 5));
      now--;
      slow.runs.push({ netns: netns ?? 'host', script });
    };
    const keys = Array.from({ length: 10 }, (_, i) => `/ns/${i}`);
    const lb = new NftServiceLb(slow, namespaces(Object.fromEntries(keys.map((k) => [k, k]))).identify, 3);
    await Promise.all(keys.map((k) => lb.apply(k, A)));
    assert.equal(slow.runs.length, 10);
    assert.equal(most, 3);
  });

  it('says notFound for a namespace that is gone, clears it without a word, and checks input first', async () => {
    const nft = new FakeNft();
    const lb = new NftServiceLb(nft, namespaces({ '/ns/a': '1:10' }).identify);
    await assert.rejects(lb.apply('/ns/gone', A), (err) => isKind(err, 'NotFound'));
    await lb.clear('/ns/gone');
    await assert.rejects(lb.apply('/ns/a', [{ vip: 'nope', backends: [] }]), (err) =>
      isKind(err, 'InvalidParameter'),
    );
    assert.equal(nft.runs.length, 0);
    await lb.clear('/ns/a');
    assert.equal(nft.runs.length, 1);
  });
});
