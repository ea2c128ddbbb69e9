import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parsePlatform } from '../../../../src/engine/images/import.js';

/** The `platform` parameter (import, build) as containerd's parser reads it for dockerd. */
describe('parsePlatform', () => {
  it('takes os/arch[/variant], an OS alone, or an architecture alone (of linux)', () => {
    assert.deepEqual(parsePlatform('linux/arm64/v8'), { os: 'linux', architecture: 'arm64', variant: 'v8' });
    assert.deepEqual(parsePlatform('linux/x86_64'), { os: 'linux', architecture: 'amd64' });
    assert.equal(parsePlatform('linux').os, 'linux');
    assert.deepEqual(parsePlatform('arm64'), { os: 'linux', architecture: 'arm64' });
    assert.deepEqual(parsePlatform('aarch64'), { os: 'linux', architecture: 'arm64' });
  });

  it("refuses an unknown word and another OS in dockerd's words", () => {
    assert.throws(
      () => parsePlatform('foobar'),
      /"foobar": unknown operating system or architecture: invalid argument/,
    );
    assert.throws(() => parsePlatform('a/b/c/d'), /unknown operating system or architecture/);
    assert.throws(() => parsePlatform('windows'), /operating system is not supported/);
    assert.throws(() => parsePlatform('windows/amd64'), /operating system is not supported/);
  });
});
