import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DigestError, digestOf, parseDigest, tryParseDigest } from '../../../src/common/digest.js';
import { BerthError, forbidden, unauthorized } from '../../../src/common/errors.js';
import { RegistryError, toErrorResponse } from '../../../src/registry/errors.js';
import { parseRange } from '../../../src/registry/handlers/blobs.js';
import { paginate } from '../../../src/registry/handlers/lists.js';
import {
  checkDigest,
  checkName,
  isValidName,
  isValidTag,
  parseReference,
} from '../../../src/registry/names.js';
import { parseContentRange, rangeHeader } from '../../../src/registry/storage/uploads.js';

const HEX = 'a'.repeat(64);

describe('digests', () => {
  it('parses sha256 and sha512', () => {
    assert.deepEqual(parseDigest(`sha256:${HEX}`), {
      algorithm: 'sha256',
      hex: HEX,
      digest: `sha256:${HEX}`,
    });
    assert.equal(parseDigest(`sha512:${'b'.repeat(128)}`).algorithm, 'sha512');
  });
  it('rejects malformed digests as invalid and unknown algorithms as unsupported', () => {
    for (const bad of [
      '',
      'sha256',
      `sha256:${'A'.repeat(64)}`,
      'sha256:abc',
      `sha256:${HEX}0`,
      `:${HEX}`,
      `sha256:${HEX} `,
    ]) {
      assert.throws(
        () => parseDigest(bad),
        (e: unknown) => e instanceof DigestError && e.reason === 'invalid',
        bad,
      );
    }
    assert.throws(
      () => parseDigest('md5:d41d8cd98f00b204e9800998ecf8427e'),
      (e: unknown) => e instanceof DigestError && e.reason === 'unsupported',
    );
    assert.throws(() => parseDigest(`multihash+base58:${HEX}`), DigestError);
    assert.equal(tryParseDigest('x'), undefined);
  });
  it('computes digests', () => {
    assert.equal(digestOf(''), 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });
  it('checkDigest maps to DIGEST_INVALID', () => {
    assert.throws(
      () => checkDigest('md5:00'),
      (e: unknown) => e instanceof RegistryError && e.code === 'DIGEST_INVALID',
    );
  });
});

describe('names and tags', () => {
  it('accepts the spec grammar', () => {
    for (const ok of ['a', 'a/b', 'library/busybox', 'a.b_c-d/e_f', 'a-b/c.d', '0', `${'a'.repeat(255)}`]) {
      assert.ok(isValidName(ok), ok);
    }
  });
  it('rejects the rest', () => {
    for (const bad of [
      '',
      'A',
      'a/',
      '/a',
      'a//b',
      '-a',
      'a-',
      'a..b/',
      'a b',
      'a.-b',
      `${'a'.repeat(256)}`,
      'a/../b',
    ]) {
      assert.ok(!isValidName(bad), bad);
    }
    assert.throws(
      () => checkName('Bad'),
      (e: unknown) => e instanceof RegistryError && e.code === 'NAME_INVALID',
    );
  });
  it('tags', () => {
    for (const ok of ['latest', 'v1.0', '_x', 'A-b.c', 'a'.repeat(128)]) assert.ok(isValidTag(ok), ok);
    for (const bad of ['', '.a', '-a', 'a'.repeat(129), 'a/b', 'a:b', 'a+b'])
      assert.ok(!isValidTag(bad), bad);
  });
  it('references are digests when they contain a colon', () => {
    assert.equal(parseReference('v1').kind, 'tag');
    assert.equal(parseReference(`sha256:${HEX}`).kind, 'digest');
    assert.throws(
      () => parseReference('sha256:x'),
      (e: unknown) => (e as RegistryError).code === 'DIGEST_INVALID',
    );
    assert.throws(
      () => parseReference('.x'),
      (e: unknown) => (e as RegistryError).code === 'TAG_INVALID',
    );
  });
});

describe('pagination', () => {
  const list = ['a', 'b', 'c', 'd', 'e'];
  const q = (s: string) => new URLSearchParams(s);
  it('pages after last, up to n, with a next link when more remain', () => {
    assert.deepEqual(paginate(list, q('n=2'), 100), { entries: ['a', 'b'], next: { last: 'b', n: 2 } });
    assert.deepEqual(paginate(list, q('n=2&last=b'), 100), {
      entries: ['c', 'd'],
      next: { last: 'd', n: 2 },
    });
    assert.deepEqual(paginate(list, q('n=2&last=d'), 100), { entries: ['e'] });
    assert.deepEqual(paginate(list, q('last=bb'), 100), { entries: ['c', 'd', 'e'] });
    assert.deepEqual(paginate(list, q('last=z'), 100), { entries: [] });
    assert.deepEqual(paginate(list, q('n=0'), 100), { entries: [] });
  });
  it('applies the server limit', () => {
    assert.deepEqual(paginate(list, q(''), 3), { entries: ['a', 'b', 'c'], next: { last: 'c', n: 3 } });
    assert.deepEqual(paginate(list, q('n=10'), 3), { entries: ['a', 'b', 'c'], next: { last: 'c', n: 3 } });
  });
  it('rejects bad n', () => {
    for (const n of ['-1', 'x', '1.5', '1e3']) {
      assert.throws(
        () => paginate(list, q(`n=${n}`), 3),
        (e: unknown) => (e as RegistryError).code === 'PAGINATION_NUMBER_INVALID',
      );
    }
  });
});

describe('ranges', () => {
  it('blob Range requests', () => {
    assert.deepEqual(parseRange('bytes=0-9', 100), { start: 0, end: 9 });
    assert.deepEqual(parseRange('bytes=90-', 100), { start: 90, end: 99 });
    assert.deepEqual(parseRange('bytes=-10', 100), { start: 90, end: 99 });
    assert.deepEqual(parseRange('bytes=50-500', 100), { start: 50, end: 99 });
    assert.equal(parseRange('bytes=100-', 100), 'invalid');
    assert.equal(parseRange('bytes=5-1', 100), 'invalid');
    assert.equal(parseRange(undefined, 100), undefined);
    assert.equal(parseRange('bytes=0-1,5-6', 100), undefined);
  });
  it('upload Content-Range and Range headers', () => {
    assert.deepEqual(parseContentRange('0-99', 0), { start: 0, end: 99 });
    assert.deepEqual(parseContentRange('bytes 100-199/*', 100), { start: 100, end: 199 });
    assert.deepEqual(parseContentRange('bytes=5-9', 5), { start: 5, end: 9 });
    assert.throws(
      () => parseContentRange('9-5', 0),
      (e: unknown) => (e as RegistryError).status === 416,
    );
    assert.throws(
      () => parseContentRange('x', 7),
      (e: unknown) => (e as RegistryError).headers?.Range === '0-6',
    );
    assert.equal(rangeHeader(0), '0-0');
    assert.equal(rangeHeader(1), '0-0');
    assert.equal(rangeHeader(10), '0-9');
  });
});

describe('error mapping', () => {
  it('registry codes keep their status and detail', () => {
    const r = toErrorResponse(new RegistryError('BLOB_UNKNOWN', undefined, { digest: 'd' }));
    assert.equal(r.status, 404);
    assert.deepEqual(r.body, {
      errors: [{ code: 'BLOB_UNKNOWN', message: 'blob unknown to registry', detail: { digest: 'd' } }],
    });
  });
  it('several errors in one answer', () => {
    const r = toErrorResponse(
      RegistryError.many(
        [
          { code: 'BLOB_UNKNOWN', message: 'm', detail: { digest: '1' } },
          { code: 'BLOB_UNKNOWN', message: 'm', detail: { digest: '2' } },
        ],
        400,
      ),
    );
    assert.equal(r.status, 400);
    assert.equal(r.body.errors.length, 2);
  });
  it('kinds from other layers', () => {
    const u = toErrorResponse(unauthorized('login', { challenge: 'Basic realm="x"' }));
    assert.equal(u.status, 401);
    assert.equal(u.headers['WWW-Authenticate'], 'Basic realm="x"');
    assert.equal(u.body.errors[0]?.code, 'UNAUTHORIZED');
    assert.equal(toErrorResponse(forbidden('no')).body.errors[0]?.code, 'DENIED');
    assert.equal(toErrorResponse(forbidden('no')).status, 403);
    const t = toErrorResponse(new BerthError('TooManyRequests', 'slow', { retryAfter: 2 }));
    assert.equal(t.status, 429);
    assert.equal(t.headers['Retry-After'], '2');
    assert.equal(toErrorResponse(new Error('boom')).status, 500);
    assert.deepEqual(toErrorResponse(new Error('secret')).body.errors[0]?.message, 'internal server error');
  });
});
