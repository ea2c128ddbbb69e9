import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  familiarMatch,
  familiarName,
  familiarString,
  isFullId,
  isIdPrefix,
  parseAnyReference,
  parseNormalizedNamed,
  parseTaggedOrLatest,
  pathMatch,
  referenceString,
  withTag,
} from '../../../src/common/reference.js';

const HEX = 'f8f12e8d5baa37548b8e42e9ae63b8466b06874e90ef53dea449499bdd343f16';

describe('reference grammar', () => {
  it('normalises official images', () => {
    const ref = parseTaggedOrLatest('busybox');
    assert.equal(referenceString(ref), 'docker.io/library/busybox:latest');
    assert.equal(familiarString(ref), 'busybox:latest');
    assert.equal(familiarName(ref), 'busybox');
  });

  it('keeps user repositories and registries with ports', () => {
    assert.equal(referenceString(parseTaggedOrLatest('user/repo')), 'docker.io/user/repo:latest');
    assert.equal(familiarString(parseTaggedOrLatest('user/repo')), 'user/repo:latest');
    const r = parseNormalizedNamed('localhost:5000/foo:1');
    assert.deepEqual(r, { domain: 'localhost:5000', path: 'foo', tag: '1' });
    assert.equal(familiarString(r), 'localhost:5000/foo:1');
    const nested = parseNormalizedNamed('127.0.0.1:5000/a/b/c:tag-1.0_x');
    assert.equal(nested.domain, '127.0.0.1:5000');
    assert.equal(nested.path, 'a/b/c');
    assert.equal(nested.tag, 'tag-1.0_x');
    assert.equal(parseNormalizedNamed('localhost/foo').domain, 'localhost');
    assert.equal(parseNormalizedNamed('index.docker.io/library/busybox').domain, 'docker.io');
    assert.equal(familiarString(parseNormalizedNamed('docker.io/library/busybox:1')), 'busybox:1');
    assert.equal(parseNormalizedNamed('[::1]:5000/foo').domain, '[::1]:5000');
  });

  it('parses digests', () => {
    const r = parseNormalizedNamed(`busybox@sha256:${HEX}`);
    assert.equal(r.digest, `sha256:${HEX}`);
    assert.equal(r.tag, undefined);
    assert.equal(familiarString(r), `busybox@sha256:${HEX}`);
    const both = parseNormalizedNamed(`busybox:1@sha256:${HEX}`);
    assert.equal(both.tag, '1');
    assert.throws(() => parseNormalizedNamed('busybox@sha256:abc'), /invalid reference format/);
    assert.throws(() => parseNormalizedNamed(`busybox@sha256:${HEX}00`), /invalid checksum digest length/);
  });

  it('answers dockerd messages for bad references', () => {
    assert.throws(() => parseNormalizedNamed('Busybox'), {
      message: 'invalid reference format: repository name must be lowercase',
    });
    assert.throws(() => parseNormalizedNamed('busybox:'), { message: 'invalid reference format' });
    assert.throws(() => parseNormalizedNamed(''), { message: 'invalid reference format' });
    assert.throws(() => parseNormalizedNamed('a//b'), { message: 'invalid reference format' });
    assert.throws(() => parseNormalizedNamed('foo:-bad'), { message: 'invalid reference format' });
    assert.throws(() => parseNormalizedNamed(`foo:${'a'.repeat(129)}`), {
      message: 'invalid reference format',
    });
    assert.doesNotThrow(() => parseNormalizedNamed(`foo:${'a'.repeat(128)}`));
    assert.throws(() => parseNormalizedNamed(HEX), /cannot specify 64-byte hexadecimal strings/);
    assert.throws(() => parseNormalizedNamed(`${'a'.repeat(250)}/b`), /must not be more than 255/);
    assert.throws(() => parseNormalizedNamed('foo bar'), { message: 'invalid reference format' });
    assert.throws(() => withTag(parseNormalizedNamed('foo'), 'bad tag'), { message: 'invalid tag format' });
  });

  it('accepts separators as distribution does', () => {
    for (const ok of ['a_b', 'a__b', 'a.b', 'a-b', 'a---b', 'a/b-c/d.e'])
      assert.doesNotThrow(() => parseNormalizedNamed(ok));
    for (const bad of ['a___b', '_a', 'a_', 'a..b', '-a'])
      assert.throws(() => parseNormalizedNamed(bad), bad);
  });

  it('tells IDs from names', () => {
    assert.deepEqual(parseAnyReference(HEX), { kind: 'id', id: `sha256:${HEX}` });
    assert.deepEqual(parseAnyReference(`sha256:${HEX}`), { kind: 'id', id: `sha256:${HEX}` });
    assert.equal(parseAnyReference('f8f12e8d5baa').kind, 'named');
    assert.ok(isFullId(HEX));
    assert.ok(!isFullId('abc'));
    assert.ok(isIdPrefix('f8f12e'));
    assert.ok(isIdPrefix('sha256:f8f12e'));
    assert.ok(!isIdPrefix('busybox'));
  });

  it('matches familiar patterns like path.Match', () => {
    const ref = parseTaggedOrLatest('localhost:5000/a/b:1');
    assert.ok(familiarMatch('localhost:5000/a/b', ref));
    assert.ok(familiarMatch('localhost:5000/a/*', ref));
    assert.ok(!familiarMatch('localhost:5000/*', ref));
    assert.ok(familiarMatch('*/a/b:1', ref));
    assert.ok(familiarMatch('busy*', parseTaggedOrLatest('busybox')));
    assert.ok(familiarMatch('busybox:lat?st', parseTaggedOrLatest('busybox')));
    assert.ok(pathMatch('[a-c]x', 'bx'));
    assert.ok(!pathMatch('[^a-c]x', 'bx'));
    assert.throws(() => pathMatch('[', 'x'));
  });
});
