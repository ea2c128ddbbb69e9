import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Periodic } from '../../../src/common/periodic.js';

describe('Periodic', () => {
  it('never runs two checks at once', async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    let release: () => void = () => {};
    const periodic = new Periodic(async () => {
      runs++;
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      running--;
    });
    const first = periodic.run();
    await periodic.run(); // a no-op while the first is still going
    assert.equal(runs, 1);
    release();
    await first;
    const second = periodic.run(); // the first is over: this one runs
    assert.equal(runs, 2);
    release();
    await second;
    assert.equal(most, 1);
  });

  it('runs every period until stopped, and runs again after a failed check', async () => {
    let runs = 0;
    const periodic = new Periodic(async () => {
      runs++;
      if (runs === 1) throw new Error('first check fails');
    });
    await assert.rejects(periodic.run(), /first check fails/);
    periodic.start(5);
    await sleep(60);
    periodic.stop();
    const seen = runs;
    assert.ok(seen >= 3, `ran ${seen} times`);
    await sleep(30);
    assert.equal(runs, seen);
  });
});
