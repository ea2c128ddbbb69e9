import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmod, link, mkdir, mkdtemp, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import tarStream from 'tar-stream';
import { isKind } from '../../../../../src/common/errors.js';
import type { CopyPlan, CopySource } from '../../../../../src/engine/build/build.types.js';
import {
  checkCopyDestination,
  checksumSources,
  fetchAddUrl,
  makeCopyTar,
  resolveChown,
  resolveChownInRootfs,
  resolveCopySources,
} from '../../../../../src/engine/build/context/index.js';
import { hostileTars } from '../../../../helpers/hostile-tars.js';
import { makeTar } from '../../storage/tar.helper.js';

interface Member {
  name: string;
  type: string;
  mode: number;
  uid: number;
  gid: number;
  content?: string;
  linkname?: string;
}

async function members(tar: NodeJS.ReadableStream): Promise<Member[]> {
  const out: Member[] = [];
  const extract = tarStream.extract();
  const reading = (async () => {
    for await (const e of extract) {
      const chunks: Buffer[] = [];
      for await (const c of e) chunks.push(c as Buffer);
      const h = e.header;
      out.push({
        name: h.name,
        type: h.type ?? 'file',
        mode: h.mode ?? 0,
        uid: h.uid ?? 0,
        gid: h.gid ?? 0,
        ...(h.type === 'file' ? { content: Buffer.concat(chunks).toString() } : {}),
        ...(h.linkname ? { linkname: h.linkname } : {}),
      });
    }
  })();
  await Promise.all([pipeline(tar, extract as unknown as NodeJS.WritableStream), reading]);
  return out;
}

const names = (ms: Member[]) => ms.map((m) => m.name);

describe('COPY and ADD', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-copy-'));
    await writeFile(join(root, 'a.txt'), 'a');
    await writeFile(join(root, 'b.txt'), 'bb');
    await writeFile(join(root, 'c.md'), 'c');
    await mkdir(join(root, 'dir/sub'), { recursive: true });
    await writeFile(join(root, 'dir/one'), '1');
    await writeFile(join(root, 'dir/sub/two'), '2');
    await writeFile(join(root, 'dir/skip.log'), 'x');
    await symlink('one', join(root, 'dir/ln'));
    await symlink('/etc/passwd', join(root, 'out'));
    await symlink('../../../../etc', join(root, 'up'));
    await symlink('dir', join(root, 'dirlink'));
    await mkdir(join(root, 'hard'));
    await writeFile(join(root, 'hard/a'), 'same');
    await link(join(root, 'hard/a'), join(root, 'hard/b'));
    await writeFile(
      join(root, 'arch.tar.gz'),
      gzipSync(await makeTar([{ name: 'x/in-archive', content: 'z' }])),
    );
  });
  after(() => rm(root, { recursive: true, force: true }));

  describe('resolveCopySources', () => {
    it('matches wildcards as filepath.Match, in lexical order', async () => {
      const found = await resolveCopySources(root, ['*.txt', 'dir/s*']);
      assert.deepEqual(
        found.map((s) => [s.relPath, s.isDir]),
        [
          ['a.txt', false],
          ['b.txt', false],
          ['dir/skip.log', false],
          ['dir/sub', true],
        ],
      );
      assert.deepEqual(
        (await resolveCopySources(root, ['[ab].tx?'])).map((s) => s.relPath),
        ['a.txt', 'b.txt'],
      );
      assert.deepEqual(
        (await resolveCopySources(root, ['dir/sub/*'])).map((s) => s.relPath),
        ['dir/sub/two'],
      );
      // the walk follows no link (as dockerd's): nothing below a linked directory matches
      await assert.rejects(resolveCopySources(root, ['dirlink/*']), /no source files were specified/);
    });

    it('drops a leading / or ./, follows links inside the root, never out of it', async () => {
      const [d] = await resolveCopySources(root, ['/dirlink']);
      assert.equal(d?.isDir, true);
      assert.equal(d?.hostPath, join(root, 'dir'));
      const [a] = await resolveCopySources(root, ['./a.txt']);
      assert.equal(a?.hostPath, join(root, 'a.txt'));
      // a link to /etc/passwd is read inside the root: there is no such file there
      await assert.rejects(resolveCopySources(root, ['out']), {
        message:
          'COPY failed: file not found in build context or excluded by .dockerignore: stat out: file does not exist',
      });
      await assert.rejects(resolveCopySources(root, ['up/passwd']), /file not found/);
      await assert.rejects(resolveCopySources(root, ['../a.txt']), {
        message: 'COPY failed: forbidden path outside the build context: ../a.txt ()',
      });
      const [inside] = await resolveCopySources(root, ['dir/../a.txt']);
      assert.equal(inside?.hostPath, join(root, 'a.txt'));
    });

    it('says what dockerd says when nothing is there, or nothing matched, and for --exclude', async () => {
      await assert.rejects(resolveCopySources(root, ['missing'], { instruction: 'ADD' }), (err) => {
        assert.ok(isKind(err, 'InvalidParameter'));
        assert.equal(
          (err as Error).message,
          'ADD failed: file not found in build context or excluded by .dockerignore: stat missing: file does not exist',
        );
        return true;
      });
      await assert.rejects(resolveCopySources(root, ['*.nothing']), {
        message: 'COPY failed: no source files were specified',
      });
      assert.deepEqual(
        (await resolveCopySources(root, ['*.txt', 'c.md'], { exclude: ['b*'] })).map((s) => s.relPath),
        ['a.txt', 'c.md'],
      );
    });

    it('wants a directory destination ending in / for several sources', () => {
      assert.throws(() => checkCopyDestination('COPY', 2, '/x'), {
        message:
          'When using COPY with more than one source file, the destination must be a directory and end with a /',
      });
      checkCopyDestination('COPY', 2, '/x/');
      checkCopyDestination('COPY', 1, '/x');
    });
  });

  describe('checksums', () => {
    it('change with content, mode and name; not with the time', async () => {
      const box = await mkdtemp(join(tmpdir(), 'berth-sum-'));
      try {
        await mkdir(join(box, 'd'));
        await writeFile(join(box, 'd/f'), 'one');
        const sum = async (p: string) => checksumSources(await resolveCopySources(box, [p]));
        const file1 = await sum('d/f');
        const dir1 = await sum('d');
        assert.match(file1, /^file:[0-9a-f]{64}$/);
        assert.match(dir1, /^dir:[0-9a-f]{64}$/);
        await utimes(join(box, 'd/f'), new Date(1000), new Date(1000));
        await utimes(join(box, 'd'), new Date(1000), new Date(1000));
        assert.equal(await sum('d/f'), file1);
        assert.equal(await sum('d'), dir1);
        await chmod(join(box, 'd/f'), 0o755);
        const file2 = await sum('d/f');
        assert.notEqual(file2, file1);
        assert.notEqual(await sum('d'), dir1);
        await writeFile(join(box, 'd/f'), 'two');
        assert.notEqual(await sum('d/f'), file2);
        const dir3 = await sum('d');
        await writeFile(join(box, 'd/g'), '');
        assert.notEqual(await sum('d'), dir3);
        const multi = await checksumSources(await resolveCopySources(box, ['d/f', 'd/g']));
        assert.match(multi, /^multi:[0-9a-f]{64}$/);
        const inline = await checksumSources([], [{ name: 'h', content: Buffer.from('x') }]);
        assert.notEqual(inline, await checksumSources([], [{ name: 'h', content: Buffer.from('y') }]));
      } finally {
        await rm(box, { recursive: true, force: true });
      }
    });
  });

  describe('makeCopyTar', () => {
    const plan = (p: Partial<CopyPlan> & { sources: CopySource[] }): CopyPlan => ({
      inline: [],
      dest: '/app',
      destIsDir: false,
      uid: 0,
      gid: 0,
      parents: false,
      extractArchives: false,
      existingDir: '/',
      ...p,
    });
    const src = (p: string) => resolveCopySources(root, [p]);

    it('copies a file to a file destination, and into a directory destination', async () => {
      const one = await members(
        makeCopyTar(
          plan({
            sources: await src('a.txt'),
            dest: '/home/u/app/x.txt',
            uid: 7,
            gid: 7,
            existingDir: '/home/u',
          }),
        ),
      );
      // a file's new parents are owned as the file (dockerd's MkdirAllAndChownNew), existing ones untouched
      assert.deepEqual(
        one.map((m) => [m.name, m.uid, m.mode]),
        [
          ['home/u/app/', 7, 0o755],
          ['home/u/app/x.txt', 7, 0o644],
        ],
      );
      assert.equal(one[1]?.content, 'a');
      const into = await members(
        makeCopyTar(
          plan({ sources: await src('*.txt'), dest: '/app/', destIsDir: true, existingDir: '/app' }),
        ),
      );
      assert.deepEqual(names(into), ['app/a.txt', 'app/b.txt']);
    });

    it("copies a directory's contents, links as links, with --chown, --chmod and --exclude", async () => {
      const ms = await members(
        makeCopyTar(
          plan({
            sources: await src('dir'),
            dest: '/srv/d',
            uid: 1000,
            gid: 1001,
            mode: 0o640,
            exclude: ['*.log'],
          }),
        ),
      );
      assert.deepEqual(names(ms), ['srv/', 'srv/d/', 'srv/d/ln', 'srv/d/one', 'srv/d/sub/', 'srv/d/sub/two']);
      // as dockerd: a copied directory's new parents are root's, the directory and its members uid:gid
      assert.deepEqual([ms[0]?.uid, ms[0]?.gid, ms[0]?.mode], [0, 0, 0o755]);
      assert.ok(ms.slice(1).every((m) => m.uid === 1000 && m.gid === 1001));
      assert.equal(ms.find((m) => m.name === 'srv/d/one')?.mode, 0o640);
      assert.equal(ms.find((m) => m.name === 'srv/d/ln')?.linkname, 'one');
    });

    it('keeps hard links within a copied directory as links', async () => {
      const ms = await members(
        makeCopyTar(plan({ sources: await src('hard'), dest: '/h', existingDir: '/' })),
      );
      assert.deepEqual(
        ms.map((m) => [m.name, m.type, m.linkname ?? '']),
        [
          ['h/', 'directory', ''],
          ['h/a', 'file', ''],
          ['h/b', 'link', 'h/a'],
        ],
      );
    });

    it('keeps the matched path with --parents', async () => {
      const ms = await members(
        makeCopyTar(
          plan({
            sources: await src('dir/sub'),
            dest: '/p/',
            destIsDir: true,
            parents: true,
            existingDir: '/p',
          }),
        ),
      );
      assert.deepEqual(names(ms), ['p/dir/', 'p/dir/sub/', 'p/dir/sub/two']);
    });

    it('writes inline files (heredocs, downloads) with their modes', async () => {
      const ms = await members(
        makeCopyTar(
          plan({
            sources: [],
            inline: [{ name: 'run.sh', content: Buffer.from('#!/bin/sh\n'), mode: 0o755 }],
            dest: '/w/',
            destIsDir: true,
            existingDir: '/w',
          }),
        ),
      );
      assert.deepEqual(ms, [
        { name: 'w/run.sh', type: 'file', mode: 0o755, uid: 0, gid: 0, content: '#!/bin/sh\n' },
      ]);
    });

    it('extracts a local archive for ADD, and refuses a hostile one', async () => {
      const ms = await members(
        makeCopyTar(
          plan({ sources: await src('arch.tar.gz'), dest: '/opt', extractArchives: true, existingDir: '/' }),
        ),
      );
      assert.deepEqual(names(ms), ['opt/', 'opt/x/in-archive']);
      assert.equal(ms[1]?.content, 'z');
      const asFile = await members(
        makeCopyTar(plan({ sources: await src('arch.tar.gz'), dest: '/opt/a.tgz' })),
      );
      assert.deepEqual(names(asFile), ['opt/', 'opt/a.tgz']);
      const box = await mkdtemp(join(tmpdir(), 'berth-hostile-add-'));
      try {
        await writeFile(join(box, 'evil.tar'), hostileTars('m').dotdot);
        await assert.rejects(
          members(
            makeCopyTar(
              plan({
                sources: await resolveCopySources(box, ['evil.tar']),
                dest: '/opt',
                extractArchives: true,
              }),
            ),
          ),
          /outside of/,
        );
      } finally {
        await rm(box, { recursive: true, force: true });
      }
    });
  });

  describe('resolveChown', () => {
    const passwd =
      'root:x:0:0:root:/root:/bin/sh\nbin:x:2:2:bin:/bin:/sbin/nologin\napp:x:1000:1000::/home/app:/bin/sh\n';
    const group = 'root:x:0:\nbin:x:2:\nstaff:x:50:\n';
    it('takes numbers and names, a lone user as its group too', () => {
      assert.deepEqual(resolveChown('1:2', '', ''), { uid: 1, gid: 2 });
      assert.deepEqual(resolveChown('55', '', ''), { uid: 55, gid: 55 });
      assert.deepEqual(resolveChown('bin', passwd, group), { uid: 2, gid: 2 });
      assert.deepEqual(resolveChown('app:staff', passwd, group), { uid: 1000, gid: 50 });
      assert.throws(() => resolveChown('nobody', passwd, group), {
        message:
          "unable to convert uid/gid chown string to host mapping: can't find uid for user nobody: no such user: nobody",
      });
      assert.throws(() => resolveChown('app', passwd, group), {
        message:
          "unable to convert uid/gid chown string to host mapping: can't find gid for group app: no such group: app",
      });
      assert.throws(() => resolveChown('a:b:c', passwd, group), /invalid chown string format/);
    });
    it('reads the files of a root filesystem', async () => {
      const rootfs = await mkdtemp(join(tmpdir(), 'berth-rootfs-'));
      try {
        await mkdir(join(rootfs, 'etc'));
        await writeFile(join(rootfs, 'etc/passwd'), passwd);
        await writeFile(join(rootfs, 'etc/group'), group);
        assert.deepEqual(await resolveChownInRootfs('app:bin', rootfs), { uid: 1000, gid: 2 });
      } finally {
        await rm(rootfs, { recursive: true, force: true });
      }
    });
  });

  describe('fetchAddUrl', () => {
    let server: Server;
    let base: string;
    before(async () => {
      server = createServer((req, res) => {
        if (req.url === '/files/tool.sh') {
          res.writeHead(200, { 'Last-Modified': 'Wed, 21 Oct 2015 07:28:00 GMT' }).end('echo hi\n');
        } else if (req.url === '/dl/') {
          res.writeHead(200, { 'Content-Disposition': 'attachment; filename="named.bin"' }).end('n');
        } else if (req.url === '/big') {
          res.end(Buffer.alloc(4096));
        } else res.writeHead(404).end('no');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((r) => server.close(() => r())));
    const signal = new AbortController().signal;

    it('names the file from the URL or Content-Disposition, keeps Last-Modified, checks --checksum', async () => {
      const f = await fetchAddUrl(`${base}/files/tool.sh`, signal);
      assert.equal(f.name, 'tool.sh');
      assert.equal(f.content.toString(), 'echo hi\n');
      assert.equal(f.mode, 0o600);
      assert.equal(f.mtime?.toISOString(), '2015-10-21T07:28:00.000Z');
      assert.equal((await fetchAddUrl(`${base}/dl/`, signal)).name, 'named.bin');
      const sha = spawnSync('sha256sum', { input: 'echo hi\n' }).stdout.toString().slice(0, 64);
      await fetchAddUrl(`${base}/files/tool.sh`, signal, `sha256:${sha}`);
      await assert.rejects(
        fetchAddUrl(`${base}/files/tool.sh`, signal, `sha256:${'0'.repeat(64)}`),
        /digest mismatch/,
      );
      await assert.rejects(fetchAddUrl(`${base}/nope`, signal), (err) => isKind(err, 'NotFound'));
      await assert.rejects(fetchAddUrl(`${base}/big`, signal, undefined, '/x', 1000), (err) =>
        isKind(err, 'TooLarge'),
      );
    });
  });
});
