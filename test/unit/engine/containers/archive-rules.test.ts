import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type tarStream from 'tar-stream';
import { BerthError } from '../../../../src/common/errors.js';
import { inContainerTerms, toolReason } from '../../../../src/engine/containers/archive/host-errors.js';
import { checkMember, memberTime } from '../../../../src/engine/containers/archive/tar-rules.js';

const header = (h: Partial<tarStream.Header>): tarStream.Header => ({
  name: 'x',
  type: 'file',
  size: 0,
  mode: 0o644,
  mtime: new Date(0),
  linkname: '',
  uid: 0,
  gid: 0,
  uname: '',
  gname: '',
  devmajor: 0,
  devminor: 0,
  ...h,
});

describe('docker cp member rules (dockerd archive.Unpack)', () => {
  it('cleans names below the extraction point and refuses those above it', () => {
    assert.equal(checkMember(header({ name: 'a/b/' }), '/d'), 'a/b');
    assert.equal(checkMember(header({ name: '/etc/passwd' }), '/d'), 'etc/passwd');
    assert.equal(checkMember(header({ name: 'a/../b' }), '/d'), 'b');
    assert.equal(checkMember(header({ name: './' }), '/d'), '.');
    for (const name of ['..', '../x', 'a/../../x', '//../x']) {
      assert.throws(() => checkMember(header({ name }), '/d'), {
        kind: 'InvalidParameter',
        message: `${JSON.stringify(name)} is outside of "/d"`,
      });
    }
  });

  it('keeps hard links below the extraction point and relative symlinks from climbing above it', () => {
    assert.equal(checkMember(header({ name: 'l', type: 'link', linkname: 'a/f' }), '/d'), 'l');
    assert.equal(checkMember(header({ name: 'l', type: 'link', linkname: '/a/f' }), '/d'), 'l');
    assert.throws(() => checkMember(header({ name: 'l', type: 'link', linkname: '../f' }), '/d'), {
      message: 'invalid hardlink "/d/l" -> "../f"',
    });
    assert.throws(() => checkMember(header({ name: 'l', type: 'link', linkname: '' }), '/d'), {
      kind: 'InvalidParameter',
    });
    assert.equal(checkMember(header({ name: 's', type: 'symlink', linkname: '/' }), '/d'), 's');
    assert.equal(checkMember(header({ name: 'a/s', type: 'symlink', linkname: '../b' }), '/d'), 'a/s');
    assert.throws(() => checkMember(header({ name: 'a/s', type: 'symlink', linkname: '../../b' }), '/d'), {
      message: 'invalid symlink "/d/a/s" -> "../../b"',
    });
    assert.throws(() => checkMember(header({ name: 's', type: 'symlink', linkname: '' }), '/d'), {
      kind: 'InvalidParameter',
    });
  });

  it('refuses types dockerd does not write and owners no file can have; odd times become now', () => {
    assert.throws(
      () => checkMember(header({ type: 'gnu-volume-header' as tarStream.Header['type'] }), '/d'),
      {
        message: /unhandled tar header type gnu-volume-header/,
      },
    );
    assert.throws(() => checkMember(header({ uid: 2 ** 40 }), '/d'), { message: /invalid uid/ });
    assert.throws(() => checkMember(header({ gid: -1 }), '/d'), { message: /invalid gid/ });
    assert.equal(checkMember(header({ uid: 65534, gid: 65534 }), '/d'), 'x');
    const when = new Date(1_600_000_000_000);
    assert.equal(memberTime(header({ mtime: when })), when);
    const now = Date.now();
    assert.ok(memberTime(header({ mtime: new Date(Number.NaN) })).getTime() >= now);
    assert.ok(memberTime(header({ mtime: new Date(2 ** 50) })).getTime() >= now);
  });
});

describe('docker cp errors in container terms', () => {
  const fs = {
    containerPathOf: (p: string) =>
      p.startsWith('/var/lib/berth/overlay/abc/merged/')
        ? p.slice('/var/lib/berth/overlay/abc/merged'.length)
        : p.startsWith('/var/lib/berth/volumes/v/_data')
          ? `/vol${p.slice('/var/lib/berth/volumes/v/_data'.length)}`
          : undefined,
  };
  const nodeError = (code: string, syscall: string, path: string, dest?: string) =>
    Object.assign(new Error(`${code}: whatever, ${syscall} '${path}'`), { code, syscall, path, dest });

  it("tells node's fs errors as Go does, with container paths and a kind for their cause", () => {
    const e1 = inContainerTerms(
      nodeError('ENAMETOOLONG', 'lstat', '/var/lib/berth/overlay/abc/merged/aaa'),
      fs,
    );
    assert.ok(e1 instanceof BerthError);
    assert.equal(e1.kind, 'InvalidParameter');
    assert.equal(e1.message, 'lstat /aaa: file name too long');
    const e2 = inContainerTerms(
      nodeError('EXDEV', 'link', '/var/lib/berth/overlay/abc/merged/d/f', '/var/lib/berth/volumes/v/_data/x'),
      fs,
    ) as BerthError;
    assert.equal(e2.message, 'link /d/f /vol/x: invalid cross-device link');
    assert.equal(
      (inContainerTerms(nodeError('EROFS', 'open', '/var/lib/berth/overlay/abc/merged/f'), fs) as BerthError)
        .kind,
      'Forbidden',
    );
    assert.equal(
      (inContainerTerms(nodeError('ENOENT', 'open', '/var/lib/berth/overlay/abc/merged/f'), fs) as BerthError)
        .kind,
      'NotFound',
    );
    const e3 = inContainerTerms(nodeError('ENOSPC', 'write', '/elsewhere/f'), fs) as BerthError;
    assert.deepEqual(
      [e3.kind, e3.message],
      ['System', 'write <outside the container>: no space left on device'],
    );
  });

  it("passes the engine's own errors and hides paths in any other message", () => {
    const own = new BerthError('NotFound', 'Could not find the file /x in container c');
    assert.equal(inContainerTerms(own, fs), own);
    const other = inContainerTerms(
      new Error('mount /var/lib/berth/overlay/abc/merged/etc failed at /secret/place'),
      fs,
    );
    assert.equal((other as BerthError).message, 'mount /etc failed at <path>');
    assert.equal(
      toolReason(new Error('mknod: /var/lib/berth/x: Operation not permitted')),
      'operation not permitted',
    );
  });
});
