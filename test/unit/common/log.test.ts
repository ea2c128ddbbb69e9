import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../src/common/log.js';

describe('Logger levels', () => {
  it("children follow their parent's level, also when it changes later (a reload)", () => {
    const root = new Logger('info');
    const child = root.child('engine');
    const grandchild = child.child('images');
    assert.equal(grandchild.enabled('debug'), false);
    root.setLevel('debug');
    assert.equal(child.enabled('debug'), true);
    assert.equal(grandchild.enabled('debug'), true);
    root.setLevel('error');
    assert.equal(grandchild.enabled('warn'), false);
    // a level set on a child is its own (and its children's)
    child.setLevel('warn');
    assert.equal(grandchild.level, 'warn');
    assert.equal(root.level, 'error');
  });
});
