import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CORPUS, checkCase } from './corpus.js';
import { type FuzzEngine, startFuzzEngine } from './engine/run.js';
import { KNOWN_DEFECTS, knownFor } from './known.js';
import { formatFailure, runFuzz, summary } from './lib/runner.js';

/**
 * The engine fuzzer in CI: the corpus (requests that once failed), then a fixed seed and count of
 * random requests against one fresh engine. BERTH_FUZZ_SEED and BERTH_FUZZ_ENGINE_COUNT change
 * them; longer runs by hand: docs/testing.md.
 */
const SEED = Number(process.env.BERTH_FUZZ_SEED ?? 20261126);
const COUNT = Number(process.env.BERTH_FUZZ_ENGINE_COUNT ?? 1500);

describe('engine fuzz', () => {
  let f: FuzzEngine & { stop(): Promise<void> };
  before(async () => {
    f = await startFuzzEngine();
  });
  after(async () => {
    await f?.stop();
  });

  for (const c of CORPUS.filter((x) => x.server === 'engine')) {
    const known = KNOWN_DEFECTS.find((k) => k.id === c.known);
    const todo = known ? `known defect ${known.id}, fixed by ${known.owner}` : undefined;
    it(`corpus: ${c.name}`, { todo }, async () => {
      // a case that may end the engine or leave it unwell gets one of its own
      const own = c.ownServer ? await startFuzzEngine() : f;
      try {
        // a known hang need not be waited on as long
        const why = await checkCase(own.target, own.fuzzer, c, { timeoutMs: c.known ? 3000 : 15_000 });
        assert.equal(why, undefined, why);
      } finally {
        if (own !== f) await own.stop();
      }
    });
  }

  it(`random requests: seed ${SEED}, ${COUNT} requests`, async () => {
    const lines: string[] = [];
    const report = await runFuzz(f.target, f.fuzzer, {
      seed: SEED,
      count: COUNT,
      timeoutMs: 15_000,
      known: knownFor('engine'),
      out: (l) => lines.push(l),
    });
    process.stderr.write(`${summary(report)}\n`);
    assert.equal(
      report.failures.length,
      0,
      `${report.failures.map((x) => formatFailure('engine', report, x)).join('\n')}\n${lines.join('\n')}`,
    );
  });
});
