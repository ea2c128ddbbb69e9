import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { BuildContext } from '../../../../../src/engine/build/build.types.js';
import { checksumSources } from '../../../../../src/engine/build/context/checksum.js';
import { LocalSources } from '../../../../../src/engine/build/context/local-sources.js';
import { receiveContext } from '../../../../../src/engine/build/context/receive.js';
import { resolveCopySources } from '../../../../../src/engine/build/context/sources.js';
import { makeTar, type TarEntry } from '../../storage/tar.helper.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A content of `size` bytes that is not one byte repeated (so a changed byte anywhere shows). */
function content(size: number, seed: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i += 32) b.writeUInt32LE((i * 2654435761 + seed) >>> 0, i);
  return b;
}

/**
 * A body that reads into buffers of its own and reads into them again once they are given back
 * (as RawChunkedBody does below node's HTTP parser), each cut in two views as a chunked body's
 * pieces are; a buffer given back is poisoned at once, so a view kept past that would show.
 */
class RecyclingBody extends Readable {
  readonly lendsBuffers = true;
  recycled = 0;
  private readonly spare: Buffer[] = [];
  private readonly own = new WeakSet<ArrayBufferLike>();
  private at = 0;

  constructor(private readonly data: Buffer) {
    super();
  }

  recycle(b: ArrayBufferLike): void {
    if (!this.own.has(b)) return;
    this.own.delete(b);
    const buf = Buffer.from(b as ArrayBuffer);
    buf.fill(0xaa);
    this.spare.push(buf);
    this.recycled++;
  }

  override _read(): void {
    if (this.at >= this.data.length) {
      this.push(null);
      return;
    }
    const buf = this.spare.pop() ?? Buffer.allocUnsafeSlow(50_000);
    const n = this.data.copy(buf, 0, this.at, this.at + buf.length);
    this.at += n;
    this.own.add(buf.buffer);
    const cut = Math.min(n, 7_777);
    this.push(buf.subarray(0, cut));
    if (n > cut) this.push(buf.subarray(cut, n));
  }
}

describe('LocalSources: earlier contexts large files, compared byte by byte', () => {
  let work: string;
  let store: LocalSources;
  const made: BuildContext[] = [];
  const signal = new AbortController().signal;
  const MiB = 1024 * 1024;
  const big = content(3 * MiB + 5, 1);

  /** A context whose tar comes in 30 000-byte pieces (as a client's chunks: never aligned). */
  const receive = async (entries: TarEntry[], opts: { hold?: boolean } = {}) => {
    const tar = await makeTar([{ name: 'Dockerfile', content: 'FROM x\n' }, ...entries]);
    const pieces = Array.from({ length: Math.ceil(tar.length / 30_000) }, (_, i) =>
      tar.subarray(i * 30_000, (i + 1) * 30_000),
    );
    const ctx = await receiveContext(Readable.from(pieces), {
      workDir: work,
      signal,
      sources: store,
      ...opts,
    });
    made.push(ctx);
    return ctx;
  };
  const digestOf = async (ctx: BuildContext, p: string) => {
    const st = await stat(join(ctx.root, p), { bigint: true });
    return ctx.digests?.get(`${st.dev}:${st.ino}`)?.sha256;
  };
  const copySum = async (ctx: BuildContext, p: string, known = true) =>
    checksumSources(await resolveCopySources(ctx.root, [p]), [], [], known ? ctx.digests : undefined);
  const stored = () => store.list().map((s) => s.sha256);

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'berth-sources-'));
    store = new LocalSources(join(work, 'sources'), 16 * MiB);
    await store.init();
  });
  after(async () => {
    for (const c of made) await c.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  it('keeps a built context large files (held or written), and no small one', async () => {
    const held = await receive([
      { name: 'app/big.bin', content: big },
      { name: 'small', content: 'x' },
    ]);
    assert.equal(await digestOf(held, 'app/big.bin'), sha(big));
    await held.cleanup({ keep: true });
    assert.deepEqual(stored(), [sha(big)]);
    const s = store.list()[0];
    assert.deepEqual(await readFile(s?.path ?? ''), big);
    // written as it arrived (a build without the cache): linked into the store
    const other = content(2 * MiB, 2);
    const written = await receive([{ name: 'other', content: other }], { hold: false });
    await written.cleanup({ keep: true });
    assert.deepEqual(stored().sort(), [sha(big), sha(other)].sort());
    // a context that is only removed (a cancelled build) keeps nothing
    const dropped = await receive([{ name: 'third', content: content(MiB, 3) }]);
    await dropped.cleanup();
    assert.equal(store.list().length, 2);
  });

  it('takes an equal member of the same path and size as the stored content: not written until read', async () => {
    const ctx = await receive([{ name: 'app/big.bin', content: big, mtime: new Date(1_700_000_000_000) }]);
    assert.equal(await digestOf(ctx, 'app/big.bin'), sha(big));
    // a hard link to an equal member: written from the stored content at once
    const linked = await receive([
      { name: 'app/big.bin', content: big },
      { name: 'app/link', type: 'link', linkname: 'app/big.bin' },
    ]);
    assert.ok((await readFile(join(linked.root, 'app/link'))).equals(big));
    assert.equal(await digestOf(linked, 'app/link'), sha(big));
    const uses = store.list().find((s) => s.sha256 === sha(big))?.usageCount;
    assert.equal(uses, 2);
    // a placeholder of its size and time: its bytes are not there yet
    const st = await stat(join(ctx.root, 'app/big.bin'));
    assert.equal(st.size, big.length);
    assert.equal(st.mtimeMs, 1_700_000_000_000);
    assert.ok(!(await readFile(join(ctx.root, 'app/big.bin'))).equals(big));
    const before = await copySum(ctx, 'app');
    await ctx.contents();
    assert.ok((await readFile(join(ctx.root, 'app/big.bin'))).equals(big));
    assert.equal((await stat(join(ctx.root, 'app/big.bin'))).mtimeMs, 1_700_000_000_000);
    assert.equal(await copySum(ctx, 'app'), before);
    assert.equal(await copySum(ctx, 'app', false), before);
  });

  for (const [where, at] of [
    ['its first byte', 0],
    ['a byte past the first window', 1024 * 1024 + 77],
    ['its last byte', big.length - 1],
  ] as const) {
    it(`hashes and holds a member of the same path and size that differs in ${where}`, async () => {
      const changed = Buffer.from(big);
      changed[at] = (changed[at] as number) ^ 0x5a;
      const ctx = await receive([{ name: 'app/big.bin', content: changed }]);
      assert.equal(await digestOf(ctx, 'app/big.bin'), sha(changed));
      const held = await copySum(ctx, 'app');
      await ctx.contents();
      const written = await readFile(join(ctx.root, 'app/big.bin'));
      assert.ok(written.equals(changed), 'the member as it was sent, the equal bytes included');
      assert.equal(await copySum(ctx, 'app', false), held);
      // the store keeps both contents once the build is done
      await ctx.cleanup({ keep: true });
      assert.ok(stored().includes(sha(changed)));
      assert.ok(await store.remove(sha(changed)));
    });
  }

  it('reads a body whose buffers are read into again once given back: equal, changed, small and written members right', async () => {
    const a = content(3 * MiB + 9, 21);
    const b = content(2 * MiB + 5, 22);
    const first = await receive([
      { name: 'lent/a.bin', content: a },
      { name: 'lent/b.bin', content: b },
    ]);
    await first.cleanup({ keep: true });
    const changed = Buffer.from(b);
    changed[MiB + 3] = (changed[MiB + 3] as number) ^ 1;
    const small = Buffer.from('a small file\n');
    const tar = await makeTar([
      { name: 'Dockerfile', content: 'FROM x\n' },
      { name: 'lent/a.bin', content: a },
      { name: 'lent/small.txt', content: small },
      { name: 'lent/b.bin', content: changed },
    ]);
    const body = new RecyclingBody(tar);
    const ctx = await receiveContext(body, { workDir: work, signal, sources: store });
    made.push(ctx);
    assert.ok(body.recycled > 50, `${body.recycled} buffers given back`);
    assert.equal(ctx.dockerfile, 'FROM x\n');
    assert.equal(await digestOf(ctx, 'lent/a.bin'), sha(a));
    assert.equal(await digestOf(ctx, 'lent/b.bin'), sha(changed));
    assert.deepEqual(await readFile(join(ctx.root, 'lent/small.txt')), small);
    const held = await copySum(ctx, 'lent');
    await ctx.contents();
    assert.ok((await readFile(join(ctx.root, 'lent/a.bin'))).equals(a));
    assert.ok((await readFile(join(ctx.root, 'lent/b.bin'))).equals(changed));
    assert.equal(await copySum(ctx, 'lent', false), held);
    // and with nothing held (every file written as it arrives)
    const written = await receiveContext(new RecyclingBody(tar), { workDir: work, signal, hold: false });
    made.push(written);
    assert.ok((await readFile(join(written.root, 'lent/b.bin'))).equals(changed));
    assert.equal(await copySum(written, 'lent'), held);
  });

  it('does not compare a member of another size or path, and keeps what a hard link shares', async () => {
    const longer = Buffer.concat([big, Buffer.from('!')]);
    const ctx = await receive([
      { name: 'app/big.bin', content: longer },
      { name: 'elsewhere.bin', content: big },
      { name: 'copy/big.bin', content: big },
      { name: 'copy/link', type: 'link', linkname: 'copy/big.bin' },
    ]);
    assert.equal(await digestOf(ctx, 'app/big.bin'), sha(longer));
    assert.equal(await digestOf(ctx, 'elsewhere.bin'), sha(big));
    await ctx.contents();
    assert.deepEqual(await readFile(join(ctx.root, 'app/big.bin')), longer);
    assert.deepEqual(await readFile(join(ctx.root, 'copy/link')), big);
    assert.deepEqual(await readFile(join(ctx.root, 'elsewhere.bin')), big);
    assert.equal(await copySum(ctx, '.'), await copySum(ctx, '.', false));
  });

  it('reads a stored content a context compared with after the store let it go', async () => {
    const ctx = await receive([{ name: 'app/big.bin', content: big }]);
    assert.ok(await store.remove(sha(big)));
    assert.deepEqual(await readdir(store.dir).then((n) => n.includes(sha(big))), false);
    await ctx.contents();
    assert.deepEqual(await readFile(join(ctx.root, 'app/big.bin')), big);
    // and a context after that has nothing to compare with: hashed as any file
    const next = await receive([{ name: 'app/big.bin', content: big }]);
    assert.equal(await digestOf(next, 'app/big.bin'), sha(big));
    assert.deepEqual(await readFile(join(next.root, 'app/big.bin')).then((b) => b.equals(big)), false);
    await next.cleanup({ keep: true });
    assert.ok(stored().includes(sha(big)));
  });

  it('keeps at most its budget, the least recently used going first', async () => {
    const small = new LocalSources(join(work, 'budget'), 5 * MiB);
    await small.init();
    const put = (b: Buffer) => (path: string) => writeFile(path, b);
    const a = content(2 * MiB, 10);
    const b = content(2 * MiB, 11);
    const c = content(2 * MiB, 12);
    await small.keep('a', a.length, sha(a), put(a));
    await small.keep('b', b.length, sha(b), put(b));
    small.used('a', a.length, sha(a));
    await new Promise((r) => setTimeout(r, 5));
    small.used('a', a.length, sha(a));
    await small.keep('c', c.length, sha(c), put(c));
    assert.deepEqual(
      small
        .list()
        .map((s) => s.sha256)
        .sort(),
      [sha(a), sha(c)].sort(),
    );
    assert.equal(small.candidate('b', b.length), undefined);
    assert.equal(small.candidate('a', a.length + 1), undefined);
    assert.equal(small.candidate('a', a.length)?.sha256, sha(a));
    // a put that does not make the whole content leaves nothing
    await assert.rejects(small.keep('d', MiB, 'f'.repeat(64), put(Buffer.alloc(10))));
    assert.deepEqual((await readdir(small.dir)).sort(), [sha(a), sha(c)].sort());
  });
});
