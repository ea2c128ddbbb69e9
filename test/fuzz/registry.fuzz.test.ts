import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CORPUS, checkCase } from './corpus.js';
import { KNOWN_DEFECTS, knownFor } from './known.js';
import { formatFailure, runFuzz, summary } from './lib/runner.js';
import { type FuzzRegistry, startFuzzRegistry } from './registry/run.js';

/**
 * The registry fuzzer in CI: the corpus, then a fixed seed and count of random requests against
 * one fresh registry process. BERTH_FUZZ_SEED and BERTH_FUZZ_REGISTRY_COUNT change them; longer
 * runs by hand: docs/testing.md.
 */
const SEED = Number(process.env.BERTH_FUZZ_SEED ?? 20261126);
const COUNT = Number(process.env.BERTH_FUZZ_REGISTRY_COUNT ?? 2500);

describe('registry fuzz', () => {
  let f: FuzzRegistry;
  before(async () => {
    f = await startFuzzRegistry();
  });
  after(async () => {
    await f?.stop();
  });

  for (const c of CORPUS.filter((x) => x.server === 'registry')) {
    const known = KNOWN_DEFECTS.find((k) => k.id === c.known);
    const todo = known ? `known defect ${known.id}, fixed by ${known.owner}` : undefined;
    it(`corpus: ${c.name}`, { todo }, async () => {
      // a case that may end the server gets one of its own
      const own = c.ownServer ? await startFuzzRegistry() : f;
      try {
        const authority = `127.0.0.1:${own.registry.port}`;
        const why = await checkCase(own.target, own.fuzzer, c, { authority, timeoutMs: 30_000 });
        assert.equal(why, undefined, why);
        // and once more: the server still serves it
        const again = await checkCase(own.target, own.fuzzer, c, { authority, timeoutMs: 30_000 });
        assert.equal(again, undefined, again);
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
      known: knownFor('registry'),
      out: (l) => lines.push(l),
    });
    process.stderr.write(`${summary(report)}\n`);
    assert.equal(
      report.failures.length,
      0,
      `${report.failures.map((x) => formatFailure('registry', report, x)).join('\n')}\n${lines.join('\n')}`,
    );
  });
});
