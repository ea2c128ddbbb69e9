import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, beforeEach, describe, it } from 'node:test';
import type { HostConfig } from '../../../../src/common/docker-types.js';
import { ContainerFs } from '../../../../src/engine/containers/archive/container-fs.js';
import { inContainerTerms } from '../../../../src/engine/containers/archive/host-errors.js';
import { Container } from '../../../../src/engine/containers/core/container.js';
import type { ContainerRecord } from '../../../../src/engine/containers/core/record.types.js';

/**
 * docker cp writes through directories held open (archive/container-fs.ts): what another process
 * (a container sharing a volume, a host user owning a bind's source) swaps in for a directory
 * after its path was resolved is never followed out of the container.
 */
describe('docker cp writes anchored in held directories', () => {
  let base: string;
  const bases: string[] = [];
  let root: string;
  let outside: string;
  let shared: string;
  let fs: ContainerFs;
  let c: Container;

  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), 'berth-anchored-'));
    bases.push(base);
    root = join(base, 'root');
    outside = join(base, 'outside');
    shared = join(base, 'shared');
    for (const d of [root, outside, shared, join(root, 'a'), join(root, 'shared')]) await mkdir(d);
    const record = { ID: 'c1', Name: '/c1', Config: {}, State: {} } as unknown as ContainerRecord;
    const hostConfig: HostConfig = { Binds: [`${shared}:/shared`] };
    c = new Container(record, hostConfig);
    fs = new ContainerFs(root, c);
  });
  after(async () => {
    for (const b of bases) await rm(b, { recursive: true, force: true }).catch(() => undefined);
  });

  it('a held directory keeps its writes when its path is swapped for a link afterwards', async () => {
    for (const [dir, name] of [
      ['/a', 'a'],
      ['/shared', null],
    ] as const) {
      const held = await fs.openDir(dir, true);
      try {
        // the swap: the directory moved away, a link to the host's outside in its place
        const hostDir = name ? join(root, name) : shared;
        await rename(hostDir, `${hostDir}.old`);
        await symlink(outside, hostDir);
        await writeFile(fs.place(held, 'f').host, 'x');
        await mkdir(fs.place(held, 'd').host);
        await symlink('/', fs.place(held, 'l').host);
        assert.deepEqual((await readdir(`${hostDir}.old`)).sort(), ['d', 'f', 'l']);
        assert.deepEqual(await readdir(outside), []);
        await rm(hostDir);
        await rename(`${hostDir}.old`, hostDir);
      } finally {
        await held.close();
      }
    }
  });

  it('a path resolved before a component became a link is refused (409), nothing made outside', async () => {
    await rm(join(root, 'a'), { recursive: true });
    await symlink(outside, join(root, 'a'));
    // as if resolved a moment before the swap
    const stale = new (class extends ContainerFs {
      override async resolve(): Promise<string> {
        return '/a/b/c';
      }
    })(root, c);
    await assert.rejects(stale.openDir('/a/b/c', true), (err: Error & { kind?: string }) => {
      assert.equal(err.kind, 'Conflict');
      assert.equal(err.message, '/a was replaced by a symbolic link during the copy');
      return true;
    });
    assert.deepEqual(await readdir(outside), []);
  });

  it('makes missing directories (0755), refuses a file on the way (400), links read in the container', async () => {
    await writeFile(join(root, 'file'), 'x');
    await symlink('/a', join(root, 'to-a'));
    const held = await fs.openDir('/to-a/new/deeper', true);
    assert.equal(held.path, '/a/new/deeper');
    await held.close();
    assert.equal((await lstat(join(root, 'a', 'new', 'deeper'))).mode & 0o777, 0o755);
    await assert.rejects(fs.openDir('/file/x', true), {
      kind: 'InvalidParameter',
      message: 'cannot extract into /file: not a directory',
    });
    await assert.rejects(fs.openDir('/nope/x', false), { kind: 'NotFound' });
  });

  it("tells errors on held entries in the container's paths, and places mount points at their source", async () => {
    const held = await fs.openDir('/a', false);
    try {
      const long = 'n'.repeat(300);
      const err = await lstat(fs.place(held, long).host).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.equal((inContainerTerms(err, fs) as Error).message, `lstat /a/${long}: file name too long`);
    } finally {
      await held.close();
    }
    const top = await fs.openDir('/', false);
    try {
      assert.equal(fs.place(top, 'shared').host, shared);
      await writeFile(join(fs.place(top, 'shared').host, 'v'), 'in the bind');
      assert.equal(await readFile(join(shared, 'v'), 'utf8'), 'in the bind');
    } finally {
      await top.close();
    }
  });
});
