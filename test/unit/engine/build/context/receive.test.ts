import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { isKind } from '../../../../../src/common/errors.js';
import type { BuildContext } from '../../../../../src/engine/build/build.types.js';
import { checksumSources } from '../../../../../src/engine/build/context/checksum.js';
import { receiveContext } from '../../../../../src/engine/build/context/receive.js';
import { resolveCopySources } from '../../../../../src/engine/build/context/sources.js';
import { hostileTars, markedOnHost, markedUnder } from '../../../../helpers/hostile-tars.js';
import { makeTar, type TarEntry } from '../../storage/tar.helper.js';

function compress(data: Buffer, tool: 'bzip2' | 'xz' | 'zstd'): Buffer {
  const r = spawnSync(tool, ['-c'], { input: data, maxBuffer: 1 << 28 });
  assert.equal(r.status, 0);
  return r.stdout;
}

async function files(root: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(root, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${e.name}` : e.name;
    out.push(e.isDirectory() ? `${path}/` : path);
    if (e.isDirectory()) out.push(...(await files(root, path)));
  }
  return out.sort();
}

describe('receiveContext', () => {
  let work: string;
  const made: BuildContext[] = [];
  const signal = new AbortController().signal;
  const receive = async (
    body: Buffer | Readable,
    opts: { dockerfile?: string; remote?: string; onProgress?: (n: number) => void; hold?: boolean } = {},
  ) => {
    const ctx = await receiveContext(body instanceof Readable ? body : Readable.from([body]), {
      workDir: work,
      signal,
      ...opts,
    });
    made.push(ctx);
    return ctx;
  };
  const basic: TarEntry[] = [
    { name: 'Dockerfile', content: 'FROM busybox\nCOPY . /x\n' },
    { name: 'a.txt', content: 'a', mode: 0o640, mtime: new Date(1_500_000_000_000) },
    { name: 'dir/', type: 'directory', mode: 0o750 },
    { name: 'dir/b.txt', content: 'b' },
    { name: 'link', type: 'symlink', linkname: '/etc/passwd' },
    { name: 'hard', type: 'link', linkname: 'a.txt' },
  ];

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'berth-ctx-'));
  });
  after(async () => {
    for (const c of made) await c.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  for (const kind of ['none', 'gzip', 'bzip2', 'xz', 'zstd'] as const) {
    it(`reads a tar (${kind}) with modes, times, links`, async () => {
      const tar = await makeTar(basic);
      const body = kind === 'none' ? tar : kind === 'gzip' ? gzipSync(tar) : compress(tar, kind);
      const ctx = await receive(body);
      assert.equal(ctx.dockerfile, 'FROM busybox\nCOPY . /x\n');
      assert.equal(ctx.dockerfilePath, 'Dockerfile');
      assert.deepEqual(await files(ctx.root), ['Dockerfile', 'a.txt', 'dir/', 'dir/b.txt', 'hard', 'link']);
      const a = await stat(join(ctx.root, 'a.txt'));
      assert.equal(a.mode & 0o7777, 0o640);
      assert.equal(a.mtimeMs, 1_500_000_000_000);
      assert.equal(a.nlink, 2);
      assert.equal((await stat(join(ctx.root, 'dir'))).mode & 0o7777, 0o750);
      assert.equal(await readlink(join(ctx.root, 'link')), '/etc/passwd');
    });
  }

  it('hashes each file as it extracts it: COPY checksums from those digests are the ones read from disk', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 7, 'z');
    const ctx = await receive(
      await makeTar([...basic, { name: 'dir/big.bin', content: big }, { name: 'empty', content: '' }]),
    );
    const digests = ctx.digests;
    assert.ok(digests);
    const bigSt = await stat(join(ctx.root, 'dir/big.bin'), { bigint: true });
    assert.equal(
      digests.get(`${bigSt.dev}:${bigSt.ino}`)?.sha256,
      createHash('sha256').update(big).digest('hex'),
    );
    const sum = async (p: string, known?: typeof digests) =>
      checksumSources(await resolveCopySources(ctx.root, [p]), [], [], known);
    const paths = ['a.txt', 'hard', 'dir', 'dir/big.bin', 'empty', '.'];
    // the big file's content is held, not written, until something reads the files
    const held = await Promise.all(paths.map((p) => sum(p, digests)));
    assert.equal((await stat(join(ctx.root, 'dir/big.bin'))).size, big.length);
    assert.notDeepEqual(await readFile(join(ctx.root, 'dir/big.bin')), big);
    await ctx.contents();
    assert.deepEqual(await readFile(join(ctx.root, 'dir/big.bin')), big);
    for (const [n, p] of paths.entries()) {
      assert.equal(await sum(p, digests), held[n], p);
      assert.equal(await sum(p), held[n], p);
    }
    // a file that changed since (another size or time) is read again, not taken from the digests
    const before = await sum('dir/b.txt', digests);
    await writeFile(join(ctx.root, 'dir/b.txt'), 'c');
    const after = await sum('dir/b.txt', digests);
    assert.notEqual(after, before);
    assert.equal(after, await sum('dir/b.txt'));
  });

  it('takes a body that is no archive as a plain Dockerfile, with an empty context', async () => {
    const ctx = await receive(Buffer.from('FROM busybox\nRUN true\n'));
    assert.equal(ctx.dockerfile, 'FROM busybox\nRUN true\n');
    assert.equal(ctx.dockerfilePath, '-');
    assert.deepEqual(await readdir(ctx.root), []);
  });

  it('finds `dockerfile` when `Dockerfile` is missing, a named one, and says when none is there', async () => {
    const lower = await receive(await makeTar([{ name: 'dockerfile', content: 'FROM a\n' }]));
    assert.equal(lower.dockerfilePath, 'dockerfile');
    const named = await receive(await makeTar([{ name: 'sub/my.df', content: 'FROM b\n' }]), {
      dockerfile: 'sub/my.df',
    });
    assert.equal(named.dockerfile, 'FROM b\n');
    await assert.rejects(receive(await makeTar([{ name: 'x', content: '' }])), (err) => {
      assert.ok(isKind(err, 'InvalidParameter'));
      assert.equal((err as Error).message, 'Cannot locate specified Dockerfile: Dockerfile');
      return true;
    });
    await assert.rejects(
      receive(await makeTar([{ name: 'Dockerfile', content: '' }]), { dockerfile: 'nope' }),
      {
        message: 'Cannot locate specified Dockerfile: nope',
      },
    );
    // nothing of the refused contexts stays
    assert.equal((await readdir(work)).length, made.length);
  });

  it('reads a Dockerfile sent outside the context (.dockerfile.<random>) and drops it as .dockerignore says', async () => {
    const ctx = await receive(
      await makeTar([
        { name: 'app.js', content: 'x' },
        { name: '.dockerignore', content: 'node_modules\n.dockerfile.0123456789abcdef0123\n' },
        { name: '.dockerfile.0123456789abcdef0123', content: 'FROM c\n' },
      ]),
      { dockerfile: '.dockerfile.0123456789abcdef0123' },
    );
    assert.equal(ctx.dockerfile, 'FROM c\n');
    assert.deepEqual(await files(ctx.root), ['.dockerignore', 'app.js']);
  });

  it('applies .dockerignore with wildcards, ** and exceptions; <Dockerfile>.dockerignore wins', async () => {
    const entries: TarEntry[] = [
      { name: 'Dockerfile', content: 'FROM d\n' },
      {
        name: '.dockerignore',
        content: '# comment\n*.log\n/build\n**/tmp\ndocs\n!docs/keep.md\n./secret\nDockerfile\n',
      },
      { name: 'a.log', content: '' },
      { name: 'src/b.log', content: '' },
      { name: 'src/main.c', content: '' },
      { name: 'build/out', content: '' },
      { name: 'x/y/tmp/z', content: '' },
      { name: 'docs/a.md', content: '' },
      { name: 'docs/keep.md', content: '' },
      { name: 'secret', content: '' },
    ];
    const ctx = await receive(await makeTar(entries));
    assert.equal(ctx.dockerfile, 'FROM d\n');
    assert.deepEqual(await files(ctx.root), [
      '.dockerignore',
      'docs/',
      'docs/keep.md',
      'src/',
      'src/b.log',
      'src/main.c',
      'x/',
      'x/y/',
    ]);
    assert.ok(ctx.ignore.includes('!docs/keep.md'));
    const own = await receive(
      await makeTar([...entries, { name: 'Dockerfile.dockerignore', content: 'src\n' }]),
    );
    assert.ok((await files(own.root)).includes('a.log'));
    assert.ok(!(await files(own.root)).includes('src/'));
  });

  it('refuses broken tars in dockerd words and leaves nothing', async () => {
    const before = (await readdir(work)).length;
    const tars = hostileTars('x');
    await assert.rejects(receive(tars.truncated), {
      message: 'Error processing tar file(exit status 1): unexpected EOF',
    });
    await assert.rejects(receive(gzipSync(tars.truncated)), /unexpected EOF/);
    await assert.rejects(receive(tars.badChecksum), { message: 'archive/tar: invalid tar header' });
    assert.equal((await readdir(work)).length, before);
  });

  it('writes nothing outside its directory whatever a hostile tar says', async () => {
    const marker = `berth-ctx-hostile-${process.pid}`;
    for (const [name, tar] of Object.entries(hostileTars(marker))) {
      const box = await mkdtemp(join(work, 'box-'));
      try {
        const ctx = await receiveContext(Readable.from([tar]), { workDir: join(box, 'w'), signal });
        await ctx.cleanup();
      } catch (err) {
        assert.ok(isKind(err, 'InvalidParameter') || isKind(err, 'TooLarge'), `${name}: ${err}`);
      }
      assert.deepEqual(await readdir(join(box, 'w')).catch(() => []), [], name);
      assert.deepEqual(await markedUnder(box, marker), [], name);
      await rm(box, { recursive: true, force: true });
    }
    assert.deepEqual(await markedOnHost(marker), []);
  });

  it('holds large contents until the files are read: a held Dockerfile, hard links, ignored files', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 'b');
    const dockerfile = `FROM g\n${'# x\n'.repeat(400 * 1024)}`;
    const ctx = await receive(
      await makeTar([
        { name: 'Dockerfile', content: dockerfile },
        { name: 'big', content: big },
        { name: 'big2', type: 'link', linkname: 'big' },
        { name: 'ign', content: Buffer.alloc(2 * 1024 * 1024, 'i') },
        { name: 'later', content: Buffer.alloc(2 * 1024 * 1024, 'l') },
        { name: '.dockerignore', content: 'ign\n' },
      ]),
    );
    assert.equal(ctx.dockerfile, dockerfile);
    await ctx.contents();
    assert.deepEqual(await readFile(join(ctx.root, 'big')), big);
    assert.deepEqual(await readFile(join(ctx.root, 'big2')), big);
    assert.deepEqual(await readFile(join(ctx.root, 'later')), Buffer.alloc(2 * 1024 * 1024, 'l'));
    assert.deepEqual(await files(ctx.root), ['.dockerignore', 'Dockerfile', 'big', 'big2', 'later']);
    assert.equal((await stat(join(ctx.root, 'later'))).mtimeMs, 1_600_000_000_000);
    // hold: false (a build without the cache) writes them as they arrive
    const written = await receive(
      await makeTar([
        { name: 'Dockerfile', content: 'FROM h\n' },
        { name: 'big', content: big },
      ]),
      { hold: false },
    );
    assert.deepEqual(await readFile(join(written.root, 'big')), big);
  });

  it('streams a context larger than what it holds in memory', async () => {
    const size = 96 * 1024 * 1024;
    async function* big() {
      const header = await makeTar([{ name: 'Dockerfile', content: 'FROM e\n' }]);
      yield header.subarray(0, header.length - 1024);
      const { headerBlock } = await import('../../../../helpers/tar-builder.js');
      yield headerBlock({ name: 'big' }, size);
      // chunks of their own (a context's chunks may be held)
      for (let i = 0; i < size / (1024 * 1024); i++) yield Buffer.alloc(1024 * 1024, 7);
      yield Buffer.alloc(1024);
    }
    const rss = process.memoryUsage().rss;
    const ctx = await receive(Readable.from(big()));
    assert.equal((await lstat(join(ctx.root, 'big'))).size, size);
    assert.ok(process.memoryUsage().rss - rss < size, 'the context was not held in memory');
  });

  it('stops a context larger than its limit once decompressed (413)', async () => {
    const bomb = gzipSync(await makeTar([{ name: 'zeros', content: Buffer.alloc(8 * 1024 * 1024) }]));
    assert.ok(bomb.length < 64 * 1024);
    const before = (await readdir(work)).length;
    await assert.rejects(
      receiveContext(Readable.from([bomb]), { workDir: work, signal, limit: 1024 * 1024 }),
      (err) => isKind(err, 'TooLarge'),
    );
    assert.equal((await readdir(work)).length, before);
  });

  it('reads a plain tar body through its events, chunk by chunk; a refused one is left paused, not destroyed', async () => {
    const tar = await makeTar([
      { name: 'Dockerfile', content: 'FROM p\n' },
      { name: 'big', content: Buffer.alloc(3 * 1024 * 1024 + 5, 'q') },
      { name: 'c.txt', content: 'c' },
    ]);
    const body = new PassThrough();
    const ctx = receive(body);
    // pieces that cut headers and bodies anywhere, some after a pause
    for (let at = 0; at < tar.length; ) {
      const n = Math.min(tar.length - at, 1 + ((at * 7919) % 70_000));
      body.write(tar.subarray(at, at + n));
      at += n;
      if (at % 3 === 0) await new Promise((r) => setImmediate(r));
    }
    body.end();
    const got = await ctx;
    assert.equal(got.dockerfile, 'FROM p\n');
    await got.contents();
    assert.deepEqual(await readFile(join(got.root, 'big')), Buffer.alloc(3 * 1024 * 1024 + 5, 'q'));
    assert.equal(await readFile(join(got.root, 'c.txt'), 'utf8'), 'c');

    const before = (await readdir(work)).length;
    const bad = new PassThrough();
    bad.write(hostileTars('x').badChecksum);
    await assert.rejects(receive(bad), { message: 'archive/tar: invalid tar header' });
    // the answer can still be sent on the request's connection
    assert.ok(!bad.destroyed);
    assert.ok(bad.isPaused());
    const cut = new PassThrough();
    cut.end(tar.subarray(0, 4096));
    await assert.rejects(receive(cut), {
      message: 'Error processing tar file(exit status 1): unexpected EOF',
    });
    const torn = new PassThrough();
    torn.write(tar.subarray(0, 4096));
    setImmediate(() => torn.destroy());
    await assert.rejects(receive(torn), /unexpected EOF/);
    await assert.rejects(
      receiveContext(Readable.from([tar]), { workDir: work, signal, limit: 1024 * 1024 }),
      (err) => isKind(err, 'TooLarge'),
    );
    assert.equal((await readdir(work)).length, before);
  });

  it('takes the Dockerfile and the ignore file from the archive as they pass, and from disk when they are links', async () => {
    const kept = await receive(
      await makeTar([
        { name: 'Dockerfile', content: 'FROM first\n' },
        { name: '.dockerignore', content: 'a\n' },
        { name: 'a', content: '' },
        { name: 'b', content: '' },
        // a later member of the same name replaces the first
        { name: 'Dockerfile', content: 'FROM second\n' },
      ]),
    );
    assert.equal(kept.dockerfile, 'FROM second\n');
    assert.deepEqual(await files(kept.root), ['.dockerignore', 'Dockerfile', 'b']);
    const linked = await receive(
      await makeTar([
        { name: 'df/real', content: 'FROM linked\n' },
        { name: 'Dockerfile', type: 'symlink', linkname: 'df/real' },
        { name: 'ign', content: 'b\n' },
        { name: '.dockerignore', type: 'symlink', linkname: '/ign' },
        { name: 'b', content: '' },
      ]),
    );
    assert.equal(linked.dockerfile, 'FROM linked\n');
    assert.deepEqual(linked.ignore, ['b']);
    const replaced = await receive(
      await makeTar([
        { name: 'Dockerfile', content: 'FROM file\n' },
        { name: 'dockerfile', content: 'FROM lower\n' },
        { name: 'Dockerfile', type: 'symlink', linkname: 'nowhere' },
      ]),
    );
    assert.equal(replaced.dockerfile, 'FROM lower\n');
    assert.equal(replaced.dockerfilePath, 'dockerfile');
  });

  it('cancels when the signal aborts', async () => {
    const ac = new AbortController();
    const body = new PassThrough();
    body.write((await makeTar([{ name: 'Dockerfile', content: 'FROM f\n' }])).subarray(0, 512));
    const before = (await readdir(work)).length;
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(receiveContext(body, { workDir: work, signal: ac.signal }));
    assert.equal((await readdir(work)).length, before);
    assert.ok(body.destroyed);
  });

  describe('remote', () => {
    let server: Server;
    let base: string;
    const routes = new Map<string, Buffer>();
    before(async () => {
      server = createServer((req, res) => {
        const gitDir = routes.get('*git*')?.toString();
        if (gitDir && req.url?.startsWith('/served.git/')) {
          // a dumb-http git server: the bare repository's files as they are
          const file = join(
            gitDir,
            decodeURIComponent(req.url.slice('/served.git/'.length).split('?')[0] ?? ''),
          );
          readFile(file).then(
            (b) => res.end(b),
            () => res.writeHead(404).end(),
          );
          return;
        }
        const body = routes.get(req.url ?? '');
        if (!body) {
          res.writeHead(404).end('not here');
          return;
        }
        res.end(body);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      routes.set('/ctx.tar.gz', gzipSync(await makeTar(basic)));
      routes.set('/Dockerfile', Buffer.from('FROM g\n'));
      routes.set('/empty', Buffer.alloc(0));
    });
    after(() => new Promise<void>((r) => server.close(() => r())));

    it('downloads a compressed tar as the context, a text as the Dockerfile', async () => {
      const body = Readable.from([Buffer.from('ignored')]);
      const ctx = await receive(body, { remote: `${base}/ctx.tar.gz` });
      assert.equal(ctx.dockerfile, 'FROM busybox\nCOPY . /x\n');
      assert.equal(await readFile(join(ctx.root, 'dir/b.txt'), 'utf8'), 'b');
      const text = await receive(Buffer.alloc(0), { remote: `${base}/Dockerfile` });
      assert.equal(text.dockerfile, 'FROM g\n');
      assert.deepEqual(await readdir(text.root), []);
      await assert.rejects(receive(Buffer.alloc(0), { remote: `${base}/missing` }), (err) => {
        assert.ok(isKind(err, 'NotFound'));
        assert.equal(
          (err as Error).message,
          `error downloading remote context ${base}/missing: failed to GET ${base}/missing with status 404 Not Found: not here`,
        );
        return true;
      });
      await assert.rejects(receive(Buffer.alloc(0), { remote: `${base}/empty` }), {
        message: `error detecting content type for remote ${base}/empty: empty response`,
      });
      const seen: number[] = [];
      await receive(Buffer.alloc(0), { remote: `${base}/ctx.tar.gz`, onProgress: (n) => seen.push(n) });
      assert.equal(seen.at(-1), routes.get('/ctx.tar.gz')?.length);
    });

    it('clones a git remote (a branch and a subdirectory) served over dumb http', async () => {
      const repo = await mkdtemp(join(work, 'repo-'));
      const git = (...args: string[]) => {
        const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' });
        assert.equal(r.status, 0, r.stderr);
      };
      git('init', '-q', '-b', 'main', 'src');
      await mkdir(join(repo, 'src/sub'));
      await writeFile(join(repo, 'src/sub/Dockerfile'), 'FROM h\n');
      await writeFile(join(repo, 'src/sub/f'), 'in git');
      git('-C', 'src', 'add', '.');
      git('-C', 'src', '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'x');
      git('-C', 'src', 'branch', 'other');
      git('clone', '-q', '--bare', 'src', 'served.git');
      git('-C', 'served.git', 'update-server-info');
      const served = join(repo, 'served.git');
      routes.set('*git*', Buffer.from(served));
      const ctx = await receive(Buffer.alloc(0), { remote: `${base}/served.git#other:sub` });
      assert.equal(ctx.dockerfile, 'FROM h\n');
      assert.equal(await readFile(join(ctx.root, 'f'), 'utf8'), 'in git');
      await assert.rejects(receive(Buffer.alloc(0), { remote: `${base}/served.git#main:nothere` }), {
        message: 'stat nothere: no such file or directory',
      });
    });

    it('says clearly when a git remote cannot be cloned', async () => {
      await assert.rejects(receive(Buffer.alloc(0), { remote: 'git://127.0.0.1:1/nothing.git' }), (err) => {
        assert.ok(isKind(err, 'InvalidParameter'));
        // dockerd's words, git's reason, and no path of the engine's
        assert.match((err as Error).message, /^error fetching: fatal: .*: exit status 128$/s);
        assert.doesNotMatch((err as Error).message, new RegExp(work));
        return true;
      });
    });
  });
});
