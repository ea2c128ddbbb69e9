import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import tarStream from 'tar-stream';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { markedOnHost } from '../../helpers/hostile-tars.js';
import { tarOf } from '../../helpers/tar-builder.js';

/** The content of the one file in a tar (undefined when it holds none). */
async function fileIn(tar: Buffer): Promise<string | undefined> {
  const extract = tarStream.extract();
  let found: string | undefined;
  const reading = (async () => {
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      if (entry.header.type === 'file') found = Buffer.concat(chunks).toString();
    }
  })();
  extract.end(tar);
  await reading;
  return found;
}

/**
 * docker cp against a volume another container keeps changing: `racer` swaps the volume's
 * directory `d` for a link to `/` (or `/etc`) and back, as fast as it can, while the engine copies
 * into and out of `victim`. Links are read in the container, and what is written or read goes
 * through directories held open, so no copy reaches the host's files; every answer is a 200 or a
 * 4xx. (Before: 17 of 400 one-file uploads landed in the host's `/`; no download of the host's
 * file was seen in 1500 tries, the window between resolving and tar being narrower, so that part
 * guards the anchored tar rather than reproducing a leak.)
 */
describe('docker cp racing a container that swaps a shared directory for a link', () => {
  const marker = `berth-race-${process.pid}`;
  let engine: TestEngine;
  const ok = (...args: string[]) => engine.dockerOk(args);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    await ok('volume', 'create', 'shared');
    await ok(
      'run',
      '-d',
      '--name',
      'racer',
      '-v',
      'shared:/vol',
      'busybox',
      'sh',
      '-c',
      'mkdir -p /vol/d; echo container-side > /vol/d/hostname; while true; do mv /vol/d /vol/d.x; ln -s /etc /vol/d; rm /vol/d; ln -s / /vol/d; rm /vol/d; mv /vol/d.x /vol/d; done',
    );
    await ok('run', '-d', '--name', 'victim', '-v', 'shared:/vol', 'busybox', 'sleep', '1000');
  });
  after(async () => {
    await engine?.destroy();
    // what an escape would have left (nothing, unless this test fails)
    for (const p of await markedOnHost(marker)) await rm(p, { force: true });
  });

  it('uploads never land on the host', async () => {
    const statuses = new Map<number, number>();
    for (let i = 0; i < 120; i++) {
      const r = await engine.request('PUT', '/v1.41/containers/victim/archive?path=/vol', {
        body: tarOf([{ name: `d/${marker}-${i}`, data: 'x' }]),
      });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `${r.status} ${r.text()}`);
    }
    assert.deepEqual(await markedOnHost(marker), [], JSON.stringify([...statuses]));
    assert.ok((statuses.get(200) ?? 0) > 0, JSON.stringify([...statuses]));
  });

  it("downloads never read the host's files", async () => {
    const hostname = await readFile('/etc/hostname', 'utf8');
    let read = 0;
    for (let i = 0; i < 150; i++) {
      // a tar that fails half-way cuts the connection (a path that vanished under it)
      const r = await engine
        .request('GET', '/v1.41/containers/victim/archive?path=/vol/d/hostname')
        .catch(() => undefined);
      if (!r) continue;
      assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `${r.status} ${r.text()}`);
      if (r.status !== 200) continue;
      const content = await fileIn(r.body);
      if (content === undefined) continue;
      read++;
      assert.notEqual(content, hostname, "the host's /etc/hostname came out");
    }
    assert.ok(read > 0);
  });
});
