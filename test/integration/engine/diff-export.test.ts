import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

const exec = promisify(execFile);

/** docker diff and docker export against a real engine (overlay snapshots). */
describe('docker diff and docker export', () => {
  let engine: TestEngine;
  const ok = (...args: string[]) => engine.dockerOk(args);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    await ok(
      'run',
      '--name',
      'changed',
      '-v',
      '/data',
      'busybox',
      'sh',
      '-c',
      'touch /tmp/a; mkdir -p /new/sub; echo x > /new/sub/f; rm /bin/ls; echo y >> /etc/passwd; ln -s /x /lnk; rm -rf /root; mkdir /root; touch /root/z; echo v > /data/in-volume',
    );
  });
  after(async () => {
    await engine?.destroy();
  });

  it('lists what changed as dockerd 20.10 does (same entries, parents first), null when nothing did', async () => {
    assert.deepEqual((await ok('diff', 'changed')).split('\n'), [
      'C /bin',
      'D /bin/ls',
      'A /data',
      'C /etc',
      'C /etc/passwd',
      'A /lnk',
      'A /new',
      'A /new/sub',
      'A /new/sub/f',
      'C /root',
      'A /root/z',
      'C /tmp',
      'A /tmp/a',
    ]);
    const raw = await engine.request('GET', '/v1.41/containers/changed/changes');
    assert.deepEqual(raw.json<unknown[]>()[1], { Path: '/bin/ls', Kind: 2 });
    const fresh = await ok('create', 'busybox', 'true');
    assert.equal((await engine.request('GET', `/v1.41/containers/${fresh}/changes`)).text(), 'null');
    // a run that only gets the engine's mount points changes nothing either
    await ok('start', '-a', fresh);
    assert.equal(await ok('diff', fresh), '');
    assert.equal((await engine.request('GET', '/v1.41/containers/nope/changes')).status, 404);
    await ok('rm', fresh);
  });

  it('exports the filesystem (no volume content, names without ./) and it imports back into a runnable image', async () => {
    const file = `${engine.dataRoot}/../export.tar`;
    await ok('export', '-o', file, 'changed');
    const { stdout } = await exec('tar', ['-tf', file], { maxBuffer: 16 << 20 });
    const names = stdout.split('\n').filter(Boolean);
    assert.ok(names.includes('new/sub/f'), names.slice(0, 5).join(' '));
    assert.ok(names.includes('bin/sh'));
    assert.ok(names.includes('data/'));
    assert.ok(!names.includes('bin/ls'));
    assert.ok(!names.includes('data/in-volume'));
    assert.ok(!names.some((n) => n.startsWith('./')));
    // dockerd's init layer is part of the filesystem
    for (const init of [
      '.dockerenv',
      'etc/hosts',
      'etc/hostname',
      'etc/resolv.conf',
      'etc/mtab',
      'dev/console',
    ])
      assert.ok(names.includes(init), init);
    // a stopped container is mounted for the export only
    const mounts = await readFile('/proc/self/mountinfo', 'utf8');
    const id = await ok('inspect', '-f', '{{.Id}}', 'changed');
    assert.ok(!mounts.includes(id), 'no mount left behind');

    await ok('import', file, 'exported:1');
    assert.equal(await ok('run', '--rm', 'exported:1', 'cat', '/new/sub/f'), 'x');
    assert.equal(await ok('run', '--rm', 'exported:1', 'tail', '-n', '1', '/etc/passwd'), 'y');
  });

  it('exports a running container, announces export, 404 for an unknown one', async () => {
    const since = Math.floor(Date.now() / 1000);
    await ok('run', '-d', '--name', 'live', 'busybox', 'sh', '-c', 'echo live > /live; sleep 1000');
    await ok('exec', 'live', 'test', '-f', '/live');
    const r = await engine.request('GET', '/v1.41/containers/live/export');
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'application/octet-stream');
    assert.ok(r.body.includes(Buffer.from('live\n')));
    assert.equal(await ok('inspect', '-f', '{{.State.Running}}', 'live'), 'true');
    assert.equal((await engine.request('GET', '/v1.41/containers/nope/export')).status, 404);
    const events = await engine.events(since, '{{.Actor.Attributes.name}}', [
      'event=export',
      'container=live',
    ]);
    assert.equal(events, 'live');
    await ok('rm', '-f', 'live');
  });
});
