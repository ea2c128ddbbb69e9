import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { HostConfig } from '../../../../src/common/docker-types.js';
import { Logger } from '../../../../src/common/log.js';
import { ContainerStore } from '../../../../src/engine/containers/core/store.js';

describe('container store', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('loads what was saved, removes what a create cut short left, skips what it cannot read', async () => {
    const root = await mkdtemp(join(tmpdir(), 'berth-store-'));
    dirs.push(root);
    const store = new ContainerStore(root, new Logger('error'));
    await store.init();
    const id = (c: string) => c.repeat(64);
    await store.save({ ID: id('a'), Name: '/a' } as never, { RestartPolicy: { Name: 'always' } });
    // a create cut short: temp files only
    await mkdir(join(root, id('b')));
    await writeFile(join(root, id('b'), 'config.v2.json.1234.tmp'), '{');
    // unreadable record: kept on disk, skipped
    await mkdir(join(root, id('c')));
    await writeFile(join(root, id('c'), 'config.v2.json'), '{"ID":');
    // a record whose hostconfig.json someone removed: defaults
    await store.save({ ID: id('d'), Name: '/d' } as never);
    const loaded = await store.loadAll();
    assert.deepEqual(loaded.map((l) => l.record.ID).sort(), [id('a'), id('d')]);
    assert.deepEqual(loaded.find((l) => l.record.ID === id('a'))?.hostConfig, {
      RestartPolicy: { Name: 'always' },
    });
    assert.deepEqual(loaded.find((l) => l.record.ID === id('d'))?.hostConfig, {});
    assert.equal(existsSync(join(root, id('b'))), false);
    assert.equal(existsSync(join(root, id('c'), 'config.v2.json')), true);
  });

  it('the record carries its HostConfig: a torn or lost hostconfig.json loses nothing', async () => {
    const root = await mkdtemp(join(tmpdir(), 'berth-store-'));
    dirs.push(root);
    const store = new ContainerStore(root, new Logger('error'));
    await store.init();
    const id = 'e'.repeat(64);
    const hc: HostConfig = { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 3 }, Memory: 1 << 20 };
    await store.save({ ID: id, Name: '/e' } as never, hc);
    assert.deepEqual(JSON.parse(await readFile(join(root, id, 'hostconfig.json'), 'utf8')), hc);
    // what a power loss may leave of a file written without an fsync: empty, or gone
    for (const damage of [
      () => writeFile(join(root, id, 'hostconfig.json'), ''),
      () => rm(join(root, id, 'hostconfig.json')),
    ]) {
      await damage();
      const [loaded] = await store.loadAll();
      assert.deepEqual(loaded?.hostConfig, hc);
      assert.deepEqual(loaded?.record, { ID: id, Name: '/e' }, 'the copy is not part of the record');
    }
    // a record written before records carried it: hostconfig.json's
    await writeFile(join(root, id, 'config.v2.json'), JSON.stringify({ ID: id, Name: '/e' }));
    await writeFile(join(root, id, 'hostconfig.json'), JSON.stringify({ Privileged: true }));
    assert.deepEqual((await store.loadAll())[0]?.hostConfig, { Privileged: true });
  });
});
