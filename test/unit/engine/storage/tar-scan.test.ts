import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import tarStream from 'tar-stream';
import { TarScanner } from '../../../../src/engine/storage/tar-scan.js';
import { makeTar } from './tar.helper.js';

interface Seen {
  name: string;
  type: string | null;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  linkname: string;
  body: string;
}

/** What the scanner reads, fed `size` bytes at a time. */
function scan(tar: Buffer, size: number): Seen[] {
  const out: Seen[] = [];
  let body: Buffer[] = [];
  const s = new TarScanner({
    member: (h) => {
      out.push({
        name: h.name,
        type: h.type,
        size: h.size,
        mode: h.mode,
        uid: h.uid,
        gid: h.gid,
        mtime: h.mtime.getTime(),
        linkname: h.linkname,
        body: '',
      });
      body = [];
    },
    data: (c) => body.push(Buffer.from(c)),
    end: () => {
      (out[out.length - 1] as Seen).body = Buffer.concat(body).toString('latin1');
    },
  });
  for (let i = 0; i < tar.length; i += size) s.write(tar.subarray(i, i + size));
  s.finish();
  return out;
}

/** What tar-stream reads of the same archive. */
async function reference(tar: Buffer): Promise<Seen[]> {
  const out: Seen[] = [];
  const extract = tarStream.extract();
  Readable.from([tar]).pipe(extract);
  for await (const e of extract) {
    const h = e.header;
    const parts: Buffer[] = [];
    for await (const c of e) parts.push(c as Buffer);
    out.push({
      name: h.name,
      type: h.type ?? 'file',
      size: h.size ?? 0,
      mode: h.mode ?? 0,
      uid: h.uid ?? 0,
      gid: h.gid ?? 0,
      mtime: h.mtime?.getTime() ?? 0,
      linkname: h.linkname ?? '',
      body: Buffer.concat(parts).toString('latin1'),
    });
  }
  return out;
}

describe('TarScanner: a tar read synchronously as chunks arrive', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-tar-scan-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads what tar-stream reads, whatever the chunks (ustar, PAX and GNU long names, links)', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(140)}`;
    const tars = [
      await makeTar([
        { name: 'a/', type: 'directory', mode: 0o750 },
        { name: 'a/file', content: 'hello\n', mode: 0o640, uid: 7, gid: 9 },
        { name: 'a/link', type: 'symlink', linkname: 'file' },
        { name: 'a/hard', type: 'link', linkname: 'a/file' },
        { name: long, content: Buffer.alloc(1500, 3) },
        { name: 'p', content: 'x', pax: { path: 'pax/name', 'SCHILY.xattr.user.k': 'v' } },
        { name: 'empty', content: '' },
      ]),
    ];
    // GNU tar's own long names and links (././@LongLink)
    const src = join(dir, 'src');
    await mkdir(join(src, 'x'.repeat(110)), { recursive: true });
    await writeFile(join(src, 'x'.repeat(110), 'y'.repeat(120)), 'gnu body');
    await symlink('z'.repeat(150), join(src, 'l'));
    tars.push(execFileSync('tar', ['--format=gnu', '-C', src, '-cf', '-', '.']));
    tars.push(execFileSync('tar', ['--format=posix', '-C', src, '-cf', '-', '.']));
    for (const tar of tars) {
      const want = await reference(tar);
      for (const size of [1, 7, 511, 512, 513, 4096, tar.length]) {
        assert.deepEqual(scan(tar, size), want, `chunks of ${size}`);
      }
    }
  });

  it('fails in tar-stream words: a bad header, an archive cut short', async () => {
    const tar = await makeTar([{ name: 'f', content: 'body' }]);
    const bad = Buffer.from(tar);
    bad[0] = 0x41;
    assert.throws(() => scan(bad, 512), /Invalid tar header/);
    for (const cut of [100, 512, 515, 1000]) {
      assert.throws(() => scan(tar.subarray(0, cut), 64), /Unexpected end of data/, `cut at ${cut}`);
    }
    // ending between members (no end-of-archive blocks) is whole
    assert.equal(scan(tar.subarray(0, 1024), 100).length, 1);
  });
});
