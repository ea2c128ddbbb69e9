import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { BuildContext, CopyPlan } from '../../../src/engine/build/build.types.js';
import { makeCopyTar, receiveContext, resolveCopySources } from '../../../src/engine/build/context/index.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { makeTar } from '../../unit/engine/storage/tar.helper.js';

async function bytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/**
 * The copy tars a build makes, extracted into a real container through the engine's docker cp
 * path (what the executor does for COPY and ADD): owners, modes, links and the directories on the
 * way come out as dockerd's classic builder leaves them.
 */
describe('build context: copy tars extracted into a container', () => {
  let engine: TestEngine;
  let work: string;
  let ctx: BuildContext;
  const signal = new AbortController().signal;
  const plan = (p: Partial<CopyPlan>): CopyPlan => ({
    sources: [],
    inline: [],
    dest: '/',
    destIsDir: true,
    uid: 0,
    gid: 0,
    parents: false,
    extractArchives: false,
    ...p,
  });
  const put = async (p: CopyPlan) => {
    const r = await engine.request('PUT', '/v1.41/containers/ctx/archive?path=/', {
      body: await bytes(makeCopyTar(p)),
      headers: { 'Content-Type': 'application/x-tar' },
    });
    assert.equal(r.status, 200, r.text());
  };
  const sh = (script: string) => engine.dockerOk(['exec', 'ctx', 'sh', '-c', script]);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    work = await mkdtemp(join(tmpdir(), 'berth-build-ctx-'));
    const archive = gzipSync(
      await makeTar([{ name: 'pkg/lib.so', content: 'L', mode: 0o755, uid: 3, gid: 4 }]),
    );
    const tar = await makeTar([
      { name: 'Dockerfile', content: 'FROM busybox\n' },
      { name: '.dockerignore', content: 'secret\n' },
      { name: 'secret', content: 's' },
      { name: 'app/', type: 'directory', mode: 0o750 },
      { name: 'app/main.sh', content: 'echo hi\n', mode: 0o755 },
      { name: 'app/conf/', type: 'directory' },
      { name: 'app/conf/a.conf', content: 'a' },
      { name: 'app/current', type: 'symlink', linkname: 'conf/a.conf' },
      { name: 'tools/bin', content: '#!/bin/sh\n', mode: 0o755 },
      { name: 'tools/alias', type: 'link', linkname: 'tools/bin' },
      { name: 'motd', content: 'hello\n' },
      { name: 'vendor.tar.gz', content: archive },
    ]);
    ctx = await receiveContext(Readable.from([gzipSync(tar)]), { workDir: work, signal });
    await engine.dockerOk(['run', '-d', '--name', 'ctx', 'busybox', 'sleep', '1000']);
  });
  after(async () => {
    await ctx?.cleanup();
    await engine?.destroy();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('COPY --chown of a directory to a new path, a file into an existing directory, ADD of an archive', async () => {
    const etcBefore = await sh('stat -c "%u:%g %a" /etc');
    await put(
      plan({
        sources: await resolveCopySources(ctx.root, ['app']),
        dest: '/srv/app',
        destIsDir: false,
        uid: 1000,
        gid: 1001,
        existingDir: '/',
      }),
    );
    await put(
      plan({ sources: await resolveCopySources(ctx.root, ['motd']), dest: '/etc/', existingDir: '/etc' }),
    );
    await put(
      plan({
        sources: await resolveCopySources(ctx.root, ['vendor.tar.gz'], { instruction: 'ADD' }),
        dest: '/opt',
        destIsDir: false,
        extractArchives: true,
        existingDir: '/',
      }),
    );
    await put(
      plan({
        inline: [{ name: 'greeting', content: Buffer.from('hey\n'), mode: 0o600 }],
        dest: '/srv/app/conf/',
        existingDir: '/srv/app/conf',
      }),
    );
    const listing = await sh(
      'cd /srv && find . | sort | while read f; do echo "$f $(stat -c "%u:%g %a %F" "$f")"; done; readlink app/current',
    );
    assert.deepEqual(listing.split('\n'), [
      '. 0:0 755 directory',
      './app 1000:1001 755 directory',
      './app/conf 1000:1001 755 directory',
      './app/conf/a.conf 1000:1001 644 regular file',
      './app/conf/greeting 0:0 600 regular file',
      './app/current 1000:1001 777 symbolic link',
      './app/main.sh 1000:1001 755 regular file',
      'conf/a.conf',
    ]);
    assert.equal(await sh('cat /etc/motd; stat -c "%u:%g %a" /etc'), `hello\n${etcBefore}`);
    assert.equal(await sh('stat -c "%u:%g %a" /opt/pkg/lib.so; cat /opt/pkg/lib.so'), '3:4 755\nL');
    await put(
      plan({ sources: await resolveCopySources(ctx.root, ['tools']), dest: '/tools', destIsDir: false }),
    );
    // a hard link stays one in the container
    const [bin, alias] = (await sh('stat -c %i /tools/bin /tools/alias')).split('\n');
    assert.equal(bin, alias);
    // .dockerignore kept the secret out of the context
    await assert.rejects(resolveCopySources(ctx.root, ['secret']), /file not found in build context/);
  });
});
