import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { type HostileCase, hostileTars, markedOnHost, markedUnder } from '../../helpers/hostile-tars.js';
import {
  pushBlob,
  pushManifest,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';

/** A check run in the container after an archive was accepted (a shell test that must print `ok`). */
type Accepted = (dir: string, m: string) => string;

/**
 * Hostile archives through docker cp (PUT /containers/{id}/archive) and docker import (POST
 * /images/create?fromSrc=-) against a real engine: each is accepted with its files inside the
 * root it belongs to (the container's, the new layer's), or refused with a 400 that names no host
 * path and writes nothing; never a 500; nothing lands on the host; the engine and the container
 * keep running.
 */
describe('hostile archives through docker cp and docker import', () => {
  const marker = `berth-hostile-${process.pid}`;
  const tars = hostileTars(marker);
  let engine: TestEngine;
  let upper: string;
  let merged: string;
  const ok = (...args: string[]) => engine.dockerOk(args);

  /** docker cp, as dockerd 20.10 answers (except 400 where it answers 500). */
  const cp: Record<HostileCase, 'refused' | Accepted> = {
    dotdot: 'refused',
    dotdotMid: 'refused',
    dotdotInner: (d, m) => `test -f ${d}/${m}-inner`,
    absolute: (d, m) => `test -f ${d}/tmp/${m}-abs`,
    paxPath: 'refused',
    paxPathAbsolute: (d, m) => `test -f ${d}/${m}-paxabs`,
    paxLinkpath: 'refused',
    // an absolute link is read in the container: the file lands in the container's /tmp
    paxSymlinkThenWrite: (_d, m) => `test -f /tmp/${m}-paxsymfile`,
    gnuLongName: 'refused',
    gnuLongLink: 'refused',
    gnuLongNameOk: (d, m) => `test -f ${d}/${m}-${'d'.repeat(150)}/${'f'.repeat(120)}`,
    symlinkRootThenWrite: (_d, m) => `test -f /tmp/${m}-symroot`,
    symlinkUpThenWrite: 'refused',
    symlinkThenOverwrite: 'refused',
    symlinkThenDirectory: 'refused',
    hardlinkAbsolute: 'refused',
    hardlinkUp: 'refused',
    // through a link to / in the container: the container's own /etc/passwd
    hardlinkViaSymlink: (d, m) => `test "$(stat -c %i ${d}/${m}-hvs)" = "$(stat -c %i /etc/passwd)"`,
    devices: (d, m) =>
      `test -c ${d}/${m}-null && test -b ${d}/${m}-loop && test -p ${d}/${m}-fifo && test "$(stat -c %t,%T ${d}/${m}-null)" = 1,3`,
    // overlay takes no 0/0 device from a client (dockerd: EPERM too)
    whiteoutDevice: 'refused',
    setuid: (d, m) =>
      `test "$(stat -c %a ${d}/${m}-suid)" = 4755 && test "$(stat -c %a ${d}/${m}-sgid)" = 2755 && test "$(stat -c %u:%g ${d}/${m}-sgid)" = 1000:1000 && test "$(stat -c %a ${d}/${m}-sticky)" = 1777`,
    // docker cp writes no whiteouts: plain files, here in the container's /etc through its link
    whiteoutBelowSymlink: () => 'test -f /etc/.wh.passwd && grep -q root /etc/passwd',
    opaqueBelowSymlink: () => 'test -f /etc/.wh..wh..opq && grep -q root /etc/passwd',
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

  /**
   * docker import: the layer is extracted by GNU tar (layer.apply.ts), stricter than dockerd;
   * whether it refuses a directory over a link that points out depends on timestamps (either way
   * nothing lands outside the layer).
   */
  const importEither = new Set<HostileCase>(['symlinkThenDirectory']);
  const importAccepted = new Set<HostileCase>([
    'absolute',
    'paxPathAbsolute',
    'gnuLongNameOk',
    'symlinkThenOverwrite',
    'devices',
    'whiteoutDevice',
    'setuid',
  ]);

  let registry: TestRegistry;
  before(async () => {
    registry = await startTestRegistry();
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    await ok('run', '-d', '--name', 'hostile', 'busybox', 'sleep', '1000');
    upper = await ok('inspect', '-f', '{{.GraphDriver.Data.UpperDir}}', 'hostile');
    merged = await ok('inspect', '-f', '{{.GraphDriver.Data.MergedDir}}', 'hostile');
    const dirs = [...Object.keys(tars).flatMap((name) => [`/x/${name}`, `/y/${name}`]), '/y/cli'];
    await ok('exec', 'hostile', 'mkdir', '-p', ...dirs);
  });
  after(async () => {
    await engine?.destroy();
    await registry?.stop();
  });

  for (const [name, tar] of Object.entries(tars) as Array<[HostileCase, Buffer]>) {
    const want = cp[name];
    it(`docker cp ${name}: ${want === 'refused' ? 'a 400, nothing written' : 'written inside the container'}`, async () => {
      const dir = `/x/${name}`;
      const r = await engine.request(
        'PUT',
        `/v1.41/containers/hostile/archive?path=${encodeURIComponent(dir)}`,
        {
          body: tar,
          headers: { 'Content-Type': 'application/x-tar' },
        },
      );
      if (want === 'refused') {
        assert.equal(r.status, 400, r.text());
        const { message } = r.json<{ message: string }>();
        assert.ok(!message.includes(engine.dir), `no host path in: ${message}`);
        // the container's root as it sees it, from the host
        assert.deepEqual(await readdir(join(merged, dir)), [], 'nothing written');
      } else {
        assert.equal(r.status, 200, r.text());
        assert.equal(await ok('exec', 'hostile', 'sh', '-c', `${want(dir, marker)} && echo ok`), 'ok');
      }
    });
  }

  it("docker cp refusals say why, in the container's paths", async () => {
    const put = async (name: HostileCase) => {
      const r = await engine.request('PUT', `/v1.41/containers/hostile/archive?path=/y/${name}`, {
        body: tars[name],
      });
      return r.json<{ message: string }>().message;
    };
    assert.match(
      await put('dotdot'),
      /^"(\.\.\/)+tmp\/berth-hostile-\d+-dotdot" is outside of "\/y\/dotdot"$/,
    );
    assert.match(
      await put('symlinkUpThenWrite'),
      /^invalid symlink "\/y\/symlinkUpThenWrite\/berth-hostile-\d+-sup" -> "\.\.\//,
    );
    assert.match(
      await put('hardlinkUp'),
      /^invalid hardlink "\/y\/hardlinkUp\/berth-hostile-\d+-hup" -> "\.\.\//,
    );
    assert.match(
      await put('hardlinkAbsolute'),
      /^invalid hardlink "\/y\/hardlinkAbsolute\/berth-hostile-\d+-habs" -> "\/etc\/passwd": no such file$/,
    );
    assert.match(
      await put('whiteoutDevice'),
      /^mknod \/y\/whiteoutDevice\/berth-hostile-\d+-wdev: operation not permitted$/,
    );
    assert.match(
      await put('longComponent'),
      /^lstat \/y\/longComponent\/berth-hostile-\d+-n+: file name too long$/,
    );
    assert.match(await put('garbage'), /^cannot read the archive: /);
    assert.match(await put('hugePaxRecord'), /^cannot read the archive: Header exceeds max size$/);
    // the docker CLI sends a tar from its standard input as it is
    const cli = await engine.docker(['cp', '-', 'hostile:/y/cli'], { input: tars.gnuLongName });
    assert.notEqual(cli.code, 0);
    assert.match(
      cli.stderr,
      /Error response from daemon: "a\/a\/.*tmp\/berth-hostile-\d+-gnulong" is outside of "\/y\/cli"/,
    );
    assert.deepEqual(await readdir(join(merged, '/y/cli')), []);
  });

  for (const [name, tar] of Object.entries(tars) as Array<[HostileCase, Buffer]>) {
    const accepted = importAccepted.has(name);
    const either = importEither.has(name);
    const what = accepted ? 'an image' : either ? 'an image or a 400' : 'a 400, no image, no layer left';
    it(`docker import ${name}: ${what}`, async () => {
      const layersBefore = await readdir(join(engine.dataRoot, 'overlay'));
      const r = await engine.request(
        'POST',
        `/v1.41/images/create?fromSrc=-&repo=hostile&tag=${name.toLowerCase()}`,
        {
          body: tar,
          headers: { 'Content-Type': 'application/x-tar' },
        },
      );
      if (accepted || (either && r.status === 200)) {
        assert.equal(r.status, 200, r.text());
        assert.match(r.text(), /"status":"sha256:[0-9a-f]{64}"/);
        return;
      }
      assert.equal(r.status, 400, r.text());
      assert.ok(!r.text().includes(engine.dir), `no host path in: ${r.text()}`);
      assert.equal((await engine.docker(['image', 'inspect', `hostile:${name.toLowerCase()}`])).code, 1);
      assert.deepEqual((await readdir(join(engine.dataRoot, 'overlay'))).sort(), layersBefore.sort());
    });
  }

  // docker pull: the same layer application, fed by the registry client while it downloads
  for (const [name, tar] of Object.entries(tars) as Array<[HostileCase, Buffer]>) {
    const accepted = importAccepted.has(name);
    const either = importEither.has(name);
    const what = accepted
      ? 'an image'
      : either
        ? 'an image or an error'
        : 'an error in the stream, no image, no layer left';
    it(`docker pull of a layer ${name}: ${what}`, async () => {
      const repo = `hostile-pull/${name.toLowerCase()}`;
      const config = JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config: { Cmd: ['sh'] },
        rootfs: { type: 'layers', diff_ids: [sha256(tar)] },
      });
      const manifest = {
        schemaVersion: 2,
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
        config: {
          mediaType: 'application/vnd.docker.container.image.v1+json',
          size: Buffer.byteLength(config),
          digest: await pushBlob(registry.url, repo, config),
        },
        layers: [
          {
            mediaType: 'application/vnd.docker.image.rootfs.diff.tar',
            size: tar.length,
            digest: await pushBlob(registry.url, repo, tar),
          },
        ],
      };
      const put = await pushManifest(registry.url, repo, 'v1', manifest, manifest.mediaType);
      assert.equal(put.status, 201, put.text());
      const layersBefore = await readdir(join(engine.dataRoot, 'overlay'));
      const ref = `${new URL(registry.url).host}/${repo}`;
      const r = await engine.request('POST', `/v1.41/images/create?fromImage=${ref}&tag=v1`);
      assert.equal(r.status, 200, r.text());
      const pulled = /Downloaded newer image/.test(r.text());
      if (accepted || (either && pulled)) {
        assert.ok(pulled, r.text());
        return;
      }
      assert.match(r.text(), /"errorDetail"/);
      assert.ok(!r.text().includes(engine.dir), `no host path in: ${r.text()}`);
      assert.equal((await engine.docker(['image', 'inspect', `${ref}:v1`])).code, 1);
      assert.deepEqual((await readdir(join(engine.dataRoot, 'overlay'))).sort(), layersBefore.sort());
    });
  }

  it('nothing landed outside the roots: the host, the data root, the spool', async () => {
    assert.deepEqual(await markedOnHost(marker, [tmpdir(), engine.dir]), []);
    // in the data root, marked names are in the container (its writable layer, its mounted
    // root) or in an imported layer
    const marked = await markedUnder(engine.dataRoot, marker);
    assert.ok(marked.length > 0);
    for (const p of marked) {
      const inContainer = [upper, merged].some((root) => !relative(root, p).startsWith('..'));
      const inLayer = /^overlay\/[0-9a-f]{64}\/diff\//.test(relative(engine.dataRoot, p));
      assert.ok(inContainer || inLayer, `${p} is outside the container's and the layers' roots`);
    }
    assert.deepEqual(await readdir(join(engine.dataRoot, 'tmp')), []);
    assert.equal(await ok('inspect', '-f', '{{.State.Status}}', 'hostile'), 'running');
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });
});
