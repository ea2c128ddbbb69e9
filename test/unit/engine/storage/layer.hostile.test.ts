import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { HostStorageOps } from '../../../../src/engine/storage/adapters/host.ops.js';
import { applyLayer } from '../../../../src/engine/storage/layer.apply.js';
import { type HostileCase, hostileTars, markedOnHost } from '../../../helpers/hostile-tars.js';
import { makeTar } from './tar.helper.js';

/**
 * Layer application (import today; pull and load later) of hostile archives with the real host
 * tools: each is applied to `<box>/layer`, next to bait (`<box>/etc/passwd`, `<box>/tmp/`,
 * `<box>/sentinel`); nothing may change outside `<box>/layer`, nor on the host, and every refusal
 * is a 400 (InvalidParameter), never an engine error.
 */
describe('layer application of hostile archives (GNU tar, root)', () => {
  const marker = `berth-hostile-layer-${process.pid}`;
  const tars = hostileTars(marker);
  let base: string;

  /**
   * What each archive must give: refused with a 400, applied (with a check of the layer), or
   * either (GNU tar's placeholders for links that point out are resolved by timestamps: the same
   * archive is refused or applied from one run to the next, inside the layer both times).
   */
  type Check = (layer: string) => Promise<void>;
  const expected: Record<HostileCase, 'refused' | Check | { refusedOr: Check }> = {
    dotdot: 'refused',
    dotdotMid: 'refused',
    // GNU tar refuses any name with `..` (dockerd would clean it)
    dotdotInner: 'refused',
    absolute: async (layer) => assert.equal(await readFile(join(layer, 'tmp', `${marker}-abs`), 'utf8'), 'x'),
    paxPath: 'refused',
    paxPathAbsolute: async (layer) =>
      assert.equal(await readFile(join(layer, `${marker}-paxabs`), 'utf8'), 'x'),
    paxLinkpath: 'refused',
    paxSymlinkThenWrite: 'refused',
    gnuLongName: 'refused',
    gnuLongLink: 'refused',
    gnuLongNameOk: async (layer) =>
      assert.equal(await readFile(join(layer, `${marker}-${'d'.repeat(150)}`, 'f'.repeat(120)), 'utf8'), 'x'),
    symlinkRootThenWrite: 'refused',
    symlinkUpThenWrite: 'refused',
    // the link (GNU tar makes it last: it points out) or the file, in the layer either way
    symlinkThenOverwrite: async (layer) => {
      const at = join(layer, `${marker}-supf`);
      if ((await lstat(at)).isSymbolicLink()) {
        assert.match(await readlink(at), new RegExp(`tmp/${marker}-symupfile$`));
      } else assert.equal(await readFile(at, 'utf8'), 'x');
    },
    symlinkThenDirectory: {
      refusedOr: async (layer) =>
        assert.equal(await readFile(join(layer, `${marker}-updir`, `${marker}-symdir`), 'utf8'), 'x'),
    },
    hardlinkAbsolute: 'refused',
    hardlinkUp: 'refused',
    hardlinkViaSymlink: 'refused',
    devices: async (layer) => {
      const st = await lstat(join(layer, `${marker}-null`));
      assert.ok(st.isCharacterDevice());
      assert.ok((await lstat(join(layer, `${marker}-loop`))).isBlockDevice());
      assert.ok((await lstat(join(layer, `${marker}-fifo`))).isFIFO());
    },
    // a 0/0 character device is what overlay takes for a whiteout: it hides a lower file, in the layer
    whiteoutDevice: async (layer) => assert.equal((await lstat(join(layer, `${marker}-wdev`))).rdev, 0),
    setuid: async (layer) => {
      assert.equal((await lstat(join(layer, `${marker}-suid`))).mode & 0o7777, 0o4755);
      assert.equal((await lstat(join(layer, `${marker}-sgid`))).mode & 0o7777, 0o2755);
      assert.equal((await lstat(join(layer, `${marker}-sticky`))).mode & 0o7777, 0o1777);
    },
    whiteoutBelowSymlink: 'refused',
    opaqueBelowSymlink: 'refused',
    whiteoutUp: 'refused',
    hugePaxRecord: 'refused',
    hugeGnuLongName: 'refused',
    hugePaxSize: 'refused',
    hugeFileSize: 'refused',
    longComponent: 'refused',
    truncated: 'refused',
    badChecksum: 'refused',
    garbage: 'refused',
  };

  before(async () => {
    base = await mkdtemp(join(tmpdir(), 'berth-hostile-layer-'));
  });
  after(async () => {
    await rm(base, { recursive: true, force: true });
  });

  // each archive as it is (unpacked in the engine's thread), and again after a 9 MiB file (a
  // layer known to be that large is unpacked on a worker thread: unpack.thread.ts)
  const bigPrefix = (async () => {
    const size = 9 * 1024 * 1024;
    const tar = await makeTar([{ name: 'big.bin', content: Buffer.alloc(size, 7) }]);
    return tar.subarray(0, 512 + size);
  })();
  const cases = (Object.entries(tars) as Array<[HostileCase, Buffer]>).flatMap(([name, tar]) => [
    [name, tar, false] as const,
    [name, tar, true] as const,
  ]);
  for (const [name, tar, big] of cases) {
    const want = expected[name];
    const what =
      want === 'refused'
        ? 'a 400'
        : typeof want === 'function'
          ? 'applied inside the layer'
          : 'a 400 or applied';
    it(`${name}${big ? ' (after 9 MiB, on the unpacking thread)' : ''}: ${what}, nothing outside`, async () => {
      const box = join(base, big ? `${name}-big` : name);
      const layer = join(box, 'layer');
      await mkdir(layer, { recursive: true });
      await mkdir(join(box, 'etc'));
      await mkdir(join(box, 'tmp'));
      await writeFile(join(box, 'etc', 'passwd'), 'bait\n');
      await writeFile(join(box, 'sentinel'), 'bait\n');
      const input = big ? [await bigPrefix, tar] : [tar];
      const sizeHint = input.reduce((n, c) => n + c.length, 0);
      const outcome = await applyLayer({ input, dir: layer, ops: new HostStorageOps(), sizeHint }).then(
        () => undefined,
        (err: unknown) => err as Error & { kind?: string },
      );
      if (outcome) {
        assert.notEqual(typeof want, 'function', `refused: ${outcome.message}`);
        assert.equal(outcome.kind, 'InvalidParameter', outcome.message);
        assert.ok(!outcome.message.includes(base), `no host path in: ${outcome.message}`);
      } else {
        assert.notEqual(want, 'refused', 'applied');
        await (typeof want === 'function' ? want : (want as { refusedOr: Check }).refusedOr)(layer);
      }
      assert.deepEqual((await readdir(box)).sort(), ['etc', 'layer', 'sentinel', 'tmp']);
      assert.deepEqual(await readdir(join(box, 'etc')), ['passwd']);
      assert.deepEqual(await readdir(join(box, 'tmp')), []);
      assert.equal(await readFile(join(box, 'etc', 'passwd'), 'utf8'), 'bait\n');
      assert.equal(await readFile(join(box, 'sentinel'), 'utf8'), 'bait\n');
      assert.deepEqual(await markedOnHost(marker, [base]), []);
    });
  }
});
