import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { dockerArchive, layerTar } from '../../helpers/image-archive.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { startAll } from '../../helpers/start-all.js';

/**
 * save and load both ways between berth and Debian's dockerd 20.10: the same image IDs, tags and
 * files on either side, and berth's archive as dockerd itself writes its legacy part (same v1
 * layer IDs).
 */
describe('save and load between berth and dockerd 20.10', () => {
  let berth: TestEngine;
  let dockerd: ReferenceDockerd;
  let work: string;
  const b = (...args: string[]) => berth.dockerOk(args, { timeoutMs: 60_000 });
  const d = (...args: string[]) => dockerd.dockerOk(args, { timeoutMs: 60_000 });

  before(async () => {
    [berth, dockerd] = await startAll([TestEngine.start(), ReferenceDockerd.start()]);
    await ensureBusybox(berth);
    await d('import', ...BUSYBOX_CHANGES, await busyboxTarball(), 'busybox:latest');
    work = execFileSync('mktemp', ['-d', join(tmpdir(), 'berth-saveload-ref-XXXXXX')], {
      encoding: 'utf8',
    }).trim();
  });
  after(async () => {
    await Promise.all([berth?.destroy(), dockerd?.destroy()]);
    if (work) execFileSync('rm', ['-rf', work]);
  });

  it("berth loads dockerd's docker save (one and several layers) under the same IDs, and runs them", async () => {
    // a two-layer image on dockerd, from an archive dockerd loads itself
    const extra = layerTar({ 'etc/': '', 'etc/from-dockerd.txt': 'dockerd layer\n' });
    const built = join(work, 'built.tar');
    await writeFile(
      built,
      dockerArchive([{ layers: [await readFile(await busyboxTarball()), extra], tags: ['two:layers'] }]),
    );
    assert.equal(await d('load', '-i', built), 'Loaded image: two:layers');
    await d('tag', 'busybox', 'busybox:ref');
    const file = join(work, 'from-dockerd.tar');
    await d('save', '-o', file, 'busybox:latest', 'busybox:ref', 'two:layers');
    const ids = await Promise.all(
      ['busybox:latest', 'two:layers'].map((r) => d('inspect', '-f', '{{.Id}}', r)),
    );

    const loaded = (await b('load', '-i', file))
      .split('\n')
      .filter((l) => l.startsWith('Loaded'))
      .sort();
    assert.deepEqual(loaded, [
      'Loaded image: busybox:latest',
      'Loaded image: busybox:ref',
      'Loaded image: two:layers',
    ]);
    assert.deepEqual(
      await Promise.all(['busybox:ref', 'two:layers'].map((r) => b('inspect', '-f', '{{.Id}}', r))),
      ids,
    );
    assert.equal(await b('run', '--rm', 'two:layers', 'cat', '/etc/from-dockerd.txt'), 'dockerd layer');
    assert.equal(await b('run', '--rm', 'busybox:ref', 'echo', 'ok'), 'ok');
  });

  it("dockerd loads berth's docker save, runs it, and saves it with the same legacy layer IDs", async () => {
    const extra = layerTar({ 'etc/': '', 'etc/from-berth.txt': 'berth layer\n' });
    await berth.request('POST', '/v1.51/images/load?quiet=1', {
      body: dockerArchive([{ layers: [await readFile(await busyboxTarball()), extra], tags: ['berth:two'] }]),
      headers: { 'Content-Type': 'application/x-tar' },
    });
    await b('tag', 'busybox', 'berth:one');
    const file = join(work, 'from-berth.tar');
    await b('save', '-o', file, 'berth:one', 'berth:two');
    const ids = await Promise.all(['berth:one', 'berth:two'].map((r) => b('inspect', '-f', '{{.Id}}', r)));

    const loaded = (await d('load', '-i', file)).split('\n').sort();
    assert.deepEqual(loaded, ['Loaded image: berth:one', 'Loaded image: berth:two']);
    assert.deepEqual(
      await Promise.all(['berth:one', 'berth:two'].map((r) => d('inspect', '-f', '{{.Id}}', r))),
      ids,
    );
    assert.equal(await d('run', '--rm', 'berth:two', 'cat', '/etc/from-berth.txt'), 'berth layer');

    // dockerd's own save of what it loaded: the same legacy directories and repositories
    const again = join(work, 'again.tar');
    await d('save', '-o', again, 'berth:one', 'berth:two');
    const legacy = (f: string) =>
      execFileSync('tar', ['-tf', f], { encoding: 'utf8' })
        .split('\n')
        .filter((n) => /^[a-f0-9]{64}\/(json|VERSION)$/.test(n))
        .sort();
    assert.deepEqual(legacy(file), legacy(again));
    for (const n of legacy(file)) {
      assert.equal(
        execFileSync('tar', ['-xOf', file, n], { encoding: 'utf8' }),
        execFileSync('tar', ['-xOf', again, n], { encoding: 'utf8' }),
        n,
      );
    }
    const repos = (f: string) =>
      JSON.parse(execFileSync('tar', ['-xOf', f, 'repositories'], { encoding: 'utf8' }));
    assert.deepEqual(repos(file), repos(again));
  });
});
