import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { setLongTimeout } from '../../../src/common/long-timer.js';

describe('setLongTimeout', () => {
  it('waits past setTimeout’s 24.8-day limit, in steps, and can be cleared', () => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'] });
    try {
      let fired = 0;
      const day = 24 * 3600 * 1000;
      setLongTimeout(() => fired++, 30 * day);
      mock.timers.tick(25 * day);
      assert.equal(fired, 0);
      mock.timers.tick(5 * day);
      assert.equal(fired, 1);
      const t = setLongTimeout(() => fired++, 40 * day);
      mock.timers.tick(30 * day);
      t.clear();
      mock.timers.tick(20 * day);
      assert.equal(fired, 1);
      setLongTimeout(() => fired++, 5);
      mock.timers.tick(5);
      assert.equal(fired, 2);
    } finally {
      mock.timers.reset();
    }
  });
});
