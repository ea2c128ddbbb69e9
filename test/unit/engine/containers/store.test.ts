import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
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
});
