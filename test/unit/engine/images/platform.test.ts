import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  formatPlatform,
  normalizePlatform,
  platformMatches,
} from '../../../../src/engine/images/platform.js';

const p = (os: string, architecture: string, variant?: string) =>
  variant ? { os, architecture, variant } : { os, architecture };

describe('image platforms (containerd matching, as moby GetImage uses it)', () => {
  it('normalizes architecture names and default variants', () => {
    assert.deepEqual(normalizePlatform(p('Linux', 'x86_64')), p('linux', 'amd64'));
    assert.deepEqual(normalizePlatform(p('linux', 'aarch64', 'v8')), p('linux', 'arm64'));
    assert.deepEqual(normalizePlatform(p('linux', 'armhf')), p('linux', 'arm', 'v7'));
    assert.deepEqual(normalizePlatform(p('linux', 'arm')), p('linux', 'arm', 'v7'));
    assert.deepEqual(normalizePlatform(p('linux', 'i386')), p('linux', '386'));
  });

  it('matches what the wanted platform runs, and a variant-less image by OS and architecture', () => {
    assert.ok(platformMatches(p('linux', 'amd64'), p('linux', 'amd64')));
    assert.ok(platformMatches(p('linux', 'x86_64'), p('linux', 'amd64')));
    assert.ok(platformMatches(p('linux', 'amd64'), p('linux', '386')), 'amd64 runs 386');
    assert.ok(!platformMatches(p('linux', '386'), p('linux', 'amd64')));
    assert.ok(platformMatches(p('linux', 'arm', 'v7'), p('linux', 'arm', 'v6')), 'v7 runs v6');
    assert.ok(!platformMatches(p('linux', 'arm', 'v6'), p('linux', 'arm', 'v7')));
    assert.ok(platformMatches(p('linux', 'arm64'), p('linux', 'arm', 'v7')), 'arm64 runs arm/v7');
    assert.ok(platformMatches(p('linux', 'arm64', 'v8.2'), p('linux', 'arm64', 'v8.1')));
    // no variant in the image: OS and architecture decide (the fallback)
    assert.ok(platformMatches(p('linux', 'arm', 'v5'), p('linux', 'arm')));
    assert.ok(!platformMatches(p('linux', 'amd64'), p('linux', 'arm64')));
    assert.ok(!platformMatches(p('windows', 'amd64'), p('linux', 'amd64')));
  });

  it('formats as containerd FormatAll', () => {
    assert.equal(formatPlatform(p('linux', 'arm', 'v7')), 'linux/arm/v7');
    assert.equal(
      formatPlatform({ os: 'windows', architecture: 'amd64', 'os.version': '10.0.1' }),
      'windows(10.0.1)/amd64',
    );
    assert.equal(formatPlatform({ os: '', architecture: 'amd64' }), 'unknown');
  });
});
