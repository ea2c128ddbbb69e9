import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CreateRequest } from '../../../../src/engine/containers/core/create.js';
import type { ContainerRecord } from '../../../../src/engine/containers/core/record.types.js';
import { statusText } from '../../../../src/engine/containers/core/views.js';
import { CREATE_OPTIONS } from '../../../helpers/create-options.js';
import { eventually } from '../../../helpers/eventually.js';
import { type Harness, harness } from './fakes.js';

/** What a start finishes of what the last engine had under way (a kill -9 in the middle). */

function req(name: string, hostConfig: CreateRequest['hostConfig'] = {}): CreateRequest {
  return { config: { Image: 'busybox' }, hostConfig, networkingConfig: {}, options: CREATE_OPTIONS, name };
}

describe('restore finishes removals and auto-removals a crash cut short', () => {
  let h: Harness;
  const recordPath = (id: string) => join(h.dir, 'data', 'containers', id, 'config.v2.json');
  const readRecord = async (id: string) =>
    JSON.parse(await readFile(recordPath(id), 'utf8')) as ContainerRecord;
  /** Change a stored record as a crash would have left it (the engine is closed). */
  const editRecord = async (id: string, edit: (r: ContainerRecord) => void) => {
    const r = await readRecord(id);
    edit(r);
    await writeFile(recordPath(id), JSON.stringify(r));
  };
  const exists = async (name: string) =>
    h.service.inspect(name).then(
      () => true,
      () => false,
    );

  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.cleanup();
  });

  it('rm -f saves its intent (and whether volumes go) before it kills the container', async () => {
    const { Id } = await h.service.create(req('doomed'));
    await h.service.start(Id);
    let atKill: ContainerRecord | undefined;
    const signal = h.runtime.signal.bind(h.runtime);
    h.runtime.signal = async (id, sig) => {
      atKill = JSON.parse(readFileSync(recordPath(id), 'utf8')) as ContainerRecord;
      return signal(id, sig);
    };
    try {
      await h.service.remove(Id, { force: true, volumes: true });
    } finally {
      h.runtime.signal = signal;
    }
    assert.equal(atKill?.State.RemovalInProgress, true);
    assert.equal(atKill?.RemoveVolumes, true);
    assert.equal(atKill?.HasBeenManuallyStopped, true);
    assert.equal(await exists(Id), false);
  });

  it('a removal cut short after the exit is finished at start, without a restart by its policy', async () => {
    const { Id } = await h.service.create(req('halfway', { RestartPolicy: { Name: 'always' } }));
    await h.service.start(Id);
    await h.service.close();
    // the crash: the removal recorded, the kill delivered, the exit never handled
    await editRecord(Id, (r) => {
      r.State.RemovalInProgress = true;
      r.HasBeenManuallyStopped = true;
    });
    h.runtime.exit(Id, 137, { silent: true });
    h.seen.length = 0;
    await h.restart();
    assert.equal(await exists(Id), false);
    assert.equal(h.images.snapshotter.prepared.has(Id), false);
    assert.equal(existsSync(join(h.dir, 'data', 'containers', Id)), false);
    assert.deepEqual(
      h.seen.filter((a) => a === 'start' || a === 'die' || a === 'destroy'),
      ['die', 'destroy'],
    );
  });

  it('a removal cut short before the kill kills the container at start and removes it', async () => {
    const { Id } = await h.service.create(req('stillrunning'));
    await h.service.start(Id);
    await h.service.close();
    await editRecord(Id, (r) => {
      r.State.RemovalInProgress = true;
    });
    h.runtime.signals.length = 0;
    await h.restart();
    assert.deepEqual(h.runtime.signals, [[Id, 9]]);
    assert.equal(await exists(Id), false);
    assert.equal(h.runtime.procs.has(Id), false);
  });

  it('a removal cut short after its layer went is finished, not left dead', async () => {
    const { Id } = await h.service.create(req('layergone'));
    await h.service.close();
    await editRecord(Id, (r) => {
      r.State.RemovalInProgress = true;
      r.State.Status = 'removing';
    });
    h.images.snapshotter.prepared.delete(Id);
    await h.restart();
    assert.equal(await exists(Id), false);
    assert.equal(h.images.snapshotter.prepared.has(Id), false, 'no layer made again for a removal');
  });

  it('AutoRemove containers that are not running go at start: created, or exited before the removal', async () => {
    const { Id: created } = await h.service.create(req('never-started', { AutoRemove: true }));
    const { Id: exited } = await h.service.create(req('exited', { AutoRemove: true }));
    const { Id: running } = await h.service.create(req('running', { AutoRemove: true }));
    const { Id: plain } = await h.service.create(req('plain'));
    await h.service.start(exited);
    await h.service.start(running);
    await h.service.close();
    h.runtime.exit(exited, 0, { silent: true });
    await h.restart();
    assert.equal(await exists(created), false);
    assert.equal(await exists(exited), false);
    assert.equal(
      (await h.service.inspect(running)).State.Status,
      'running',
      'a running one stays (live restore)',
    );
    assert.equal((await h.service.inspect(plain)).State.Status, 'created');
    // and goes when it exits
    h.runtime.exit(running, 0);
    await eventually(
      'the running --rm container removed after its exit',
      async () => !(await exists(running)),
    );
    await h.service.remove(plain, {});
  });

  it('a running container being killed for removal still lists as running (dockerd State.String)', async () => {
    const { Id } = await h.service.create(req('listed'));
    await h.service.start(Id);
    const r = await readRecord(Id);
    r.State.RemovalInProgress = true;
    assert.match(statusText(r), /^Up /);
    r.State.Running = false;
    r.State.Status = 'removing';
    assert.equal(statusText(r), 'Removal In Progress');
    await h.service.remove(Id, { force: true });
  });
});

describe('a removal finished at start does what was asked of the volumes', () => {
  let h: Harness;
  before(async () => {
    h = await harness({ volumes: true });
  });
  after(async () => {
    await h.cleanup();
  });

  it('rm -v: its anonymous volume goes; rm: it stays', async () => {
    const make = async (name: string) => {
      const { Id } = await h.service.create({
        config: { Image: 'busybox', Volumes: { '/data': {} } },
        hostConfig: {},
        networkingConfig: {},
        options: CREATE_OPTIONS,
        name,
      });
      const path = join(h.dir, 'data', 'containers', Id, 'config.v2.json');
      const record = JSON.parse(await readFile(path, 'utf8')) as ContainerRecord;
      const volume = record.MountPoints?.[0]?.Name ?? '';
      assert.ok(volume);
      return { Id, path, record, volume };
    };
    const withV = await make('with-v');
    const withoutV = await make('without-v');
    await h.service.close();
    for (const [c, volumes] of [
      [withV, true],
      [withoutV, false],
    ] as const) {
      c.record.State.RemovalInProgress = true;
      if (volumes) c.record.RemoveVolumes = true;
      await writeFile(c.path, JSON.stringify(c.record));
    }
    await h.restart();
    for (const c of [withV, withoutV]) {
      await assert.rejects(h.service.inspect(c.Id));
    }
    assert.equal(existsSync(join(h.dir, 'data', 'volumes', withV.volume)), false, 'the rm -v volume is gone');
    assert.equal(existsSync(join(h.dir, 'data', 'volumes', withoutV.volume)), true, 'the rm volume stays');
  });

  it('a removal cut short after its volume went (the record goes last) is finished', async () => {
    const { Id } = await h.service.create({
      config: { Image: 'busybox', Volumes: { '/data': {} } },
      hostConfig: {},
      networkingConfig: {},
      options: CREATE_OPTIONS,
      name: 'volume-gone',
    });
    const path = join(h.dir, 'data', 'containers', Id, 'config.v2.json');
    const record = JSON.parse(await readFile(path, 'utf8')) as ContainerRecord;
    const volume = record.MountPoints?.[0]?.Name ?? '';
    await h.service.close();
    // the crash: everything of it gone but its record, marked for removal
    record.State.RemovalInProgress = true;
    record.State.Status = 'removing';
    record.RemoveVolumes = true;
    await writeFile(path, JSON.stringify(record));
    h.images.snapshotter.prepared.delete(Id);
    await rm(join(h.dir, 'data', 'volumes', volume), { recursive: true });
    await h.restart();
    await assert.rejects(h.service.inspect(Id));
    assert.equal(existsSync(join(h.dir, 'data', 'containers', Id)), false);
  });

  it('a container the engine froze for a write (docker cp) when it was killed is thawed; a paused one stays paused', async () => {
    const { Id: frozen } = await h.service.create(req('frozen-by-cp'));
    const { Id: paused } = await h.service.create(req('paused-by-user'));
    await h.service.start(frozen);
    await h.service.start(paused);
    await h.service.pause(paused);
    await h.service.close();
    // the crash: docker cp had frozen the container (the record does not say paused)
    await h.runtime.pause(frozen);
    await h.restart();
    assert.equal((await h.runtime.state(frozen))?.status, 'running');
    assert.equal((await h.service.inspect(frozen)).State.Status, 'running');
    assert.equal((await h.runtime.state(paused))?.status, 'paused');
    assert.equal((await h.service.inspect(paused)).State.Status, 'paused');
    await h.service.remove(frozen, { force: true });
    await h.service.unpause(paused);
    await h.service.remove(paused, { force: true });
  });
});
