import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CreateRequest } from '../../../../src/engine/containers/core/create.js';
import type { ContainerRecord } from '../../../../src/engine/containers/core/record.types.js';
import { CREATE_OPTIONS } from '../../../helpers/create-options.js';
import { eventually } from '../../../helpers/eventually.js';
import { type Harness, harness } from './fakes.js';

/** `wait` and `DELETE` answer when what they report is true; the slow part comes after. */

function req(name: string): CreateRequest {
  return {
    config: { Image: 'busybox' },
    hostConfig: {},
    networkingConfig: {},
    options: CREATE_OPTIONS,
    name,
  };
}

/** A gate a fake step waits at until the test opens it. */
function gate(): { wait: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

describe('answers as soon as they are true', () => {
  let h: Harness;
  const recordPath = (id: string) => join(h.dir, 'data', 'containers', id, 'config.v2.json');
  const readRecord = async (id: string) =>
    JSON.parse(await readFile(recordPath(id), 'utf8')) as ContainerRecord;

  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.cleanup();
  });

  it('wait answers once the exit is recorded, before the runtime state and the rootfs go', async () => {
    const { Id } = await h.service.create(req('waited'));
    await h.service.start(Id);
    const waiting = await h.service.wait(Id, 'not-running');
    const held = gate();
    const del = h.runtime.delete.bind(h.runtime);
    h.runtime.delete = async (id) => {
      await held.wait;
      return del(id);
    };
    try {
      h.runtime.exit(Id, 3);
      // bounded: an answer held back by the clean-up (the gate stays shut) fails, never hangs
      const r = await Promise.race([
        waiting(),
        sleep(5000).then(() => assert.fail('wait did not answer while the clean-up was held')),
      ]);
      assert.equal(r.StatusCode, 3);
      assert.equal((await readRecord(Id)).State.Status, 'exited', 'the exit is on disk');
      assert.ok(h.runtime.procs.has(Id), 'the runtime still has it');
      // a removal asked for meanwhile answers without waiting for the clean-up either
      await h.service.remove(Id, {});
      await assert.rejects(h.service.inspect(Id), /No such container/);
    } finally {
      held.open();
      h.runtime.delete = del;
    }
    await eventually('the teardown finished', () => !existsSync(join(h.dir, 'data', 'containers', Id)));
    assert.equal(h.runtime.procs.has(Id), false);
    assert.equal(h.images.snapshotter.prepared.has(Id), false);
  });

  it('DELETE answers once the container is gone from the API: its name is free at once, its files go after', async () => {
    const { Id } = await h.service.create(req('reused'));
    const held = gate();
    const remove = h.images.snapshotter.remove.bind(h.images.snapshotter);
    h.images.snapshotter.remove = async (key) => {
      await held.wait;
      return remove(key);
    };
    let second: string;
    try {
      await Promise.race([
        h.service.remove('reused', {}),
        sleep(5000).then(() => assert.fail('DELETE did not answer while the teardown was held')),
      ]);
      await assert.rejects(h.service.inspect(Id), /No such container/);
      // the record, marked for removal, is what a crash now would leave: the next start finishes it
      const left = await readRecord(Id);
      assert.equal(left.State.RemovalInProgress, true);
      assert.equal(left.State.Status, 'removing');
      second = (await h.service.create(req('reused'))).Id;
      assert.equal((await h.service.inspect('reused')).Id, second);
    } finally {
      held.open();
      h.images.snapshotter.remove = remove;
    }
    await eventually('the teardown finished', () => !existsSync(join(h.dir, 'data', 'containers', Id)));
    assert.equal(h.images.snapshotter.prepared.has(Id), false);
    assert.equal((await h.service.inspect('reused')).Id, second);
    await h.service.remove(second, {});
  });

  it('a teardown a crash cut short is finished at start, and the name stays with the container that took it', async () => {
    const { Id: old } = await h.service.create(req('taken'));
    const { Id: taker } = await h.service.create(req('taker'));
    await h.service.close();
    // the crash: `old` removed (its intent on disk, its teardown not done), `taker` renamed to its name
    const edit = async (id: string, f: (r: ContainerRecord) => void) => {
      const r = await readRecord(id);
      f(r);
      await writeFile(recordPath(id), JSON.stringify(r));
    };
    await edit(old, (r) => {
      r.State.RemovalInProgress = true;
      r.State.Status = 'removing';
    });
    await edit(taker, (r) => {
      r.Name = '/taken';
    });
    await h.restart();
    assert.equal((await h.service.inspect('taken')).Id, taker);
    await assert.rejects(h.service.inspect(old), /No such container/);
    assert.equal(
      existsSync(join(h.dir, 'data', 'containers', old)),
      false,
      'finished before the engine answers',
    );
    assert.equal(h.images.snapshotter.prepared.has(old), false);
    await h.service.remove(taker, {});
  });
});
