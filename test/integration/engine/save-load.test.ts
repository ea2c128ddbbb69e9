import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { type HostileCase, hostileTars, markedOnHost } from '../../helpers/hostile-tars.js';
import { dockerArchive, imageConfig, layerTar, sha256 } from '../../helpers/image-archive.js';
import { requireTool } from '../../helpers/process.js';
import { RawConnection } from '../../helpers/raw-http.js';
import { tarOf } from '../../helpers/tar-builder.js';

/** The JSON lines of a load's answer. */
function lines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The member names of a tar file (GNU tar lists them). */
function members(path: string): string[] {
  return execFileSync('tar', ['-tf', path], { encoding: 'utf8' }).split('\n').filter(Boolean);
}

describe('docker save and docker load', () => {
  let engine: TestEngine;
  let work: string;
  let busyboxId: string;
  let busyboxLayer: Buffer;
  const ok = (...args: string[]) => engine.dockerOk(args, { timeoutMs: 60_000 });

  /** What the engine stores: images, layer records, blobs, spool files. */
  async function stored(): Promise<string> {
    const list = async (p: string) =>
      (await readdir(join(engine.dataRoot, p)).catch(() => [])).sort().join(',');
    return [
      (await ok('images', '-a', '--no-trunc', '--format', '{{.ID}} {{.Repository}}:{{.Tag}}'))
        .split('\n')
        .sort()
        .join('\n'),
      await list('image/snapshots/layers'),
      await list('content/blobs/sha256'),
      await list('tmp'),
    ].join('\n');
  }

  async function load(body: Buffer, query = 'quiet=1'): Promise<Array<Record<string, unknown>>> {
    const r = await engine.request('POST', `/v1.51/images/load?${query}`, {
      body,
      headers: { 'Content-Type': 'application/x-tar' },
    });
    assert.equal(r.status, 200, r.text());
    return lines(r.text());
  }

  before(async () => {
    engine = await TestEngine.start();
    busyboxId = await ensureBusybox(engine);
    await ok('tag', 'busybox', 'busybox:two');
    busyboxLayer = await readFile(await busyboxTarball());
    work = execFileSync('mktemp', ['-d', join(tmpdir(), 'berth-saveload-XXXXXX')], {
      encoding: 'utf8',
    }).trim();
  });
  after(async () => {
    await engine?.destroy();
    if (work) execFileSync('rm', ['-rf', work]);
  });

  it('saves in docker save form with the OCI layout, and loads it back under the same ID and tags', async () => {
    const file = join(work, 'busybox.tar');
    await ok('save', '-o', file, 'busybox');
    const names = members(file);
    const diff = sha256(busyboxLayer).slice(7);
    for (const n of ['manifest.json', 'repositories', 'index.json', 'oci-layout', `blobs/sha256/${diff}`])
      assert.ok(names.includes(n), `${n} in ${names.join(' ')}`);
    const legacy = names.filter((n) => /^[a-f0-9]{64}\/(VERSION|json|layer\.tar)$/.test(n));
    assert.equal(legacy.length, 3, names.join(' '));
    const manifest = JSON.parse(execFileSync('tar', ['-xOf', file, 'manifest.json'], { encoding: 'utf8' }));
    assert.deepEqual(manifest, [
      {
        Config: `blobs/sha256/${busyboxId.slice(7)}`,
        RepoTags: ['busybox:latest', 'busybox:two'],
        Layers: [`blobs/sha256/${diff}`],
      },
    ]);
    const index = JSON.parse(execFileSync('tar', ['-xOf', file, 'index.json'], { encoding: 'utf8' }));
    assert.deepEqual(
      index.manifests.map((m: { annotations: Record<string, string> }) => m.annotations),
      [
        {
          'io.containerd.image.name': 'docker.io/library/busybox:latest',
          'org.opencontainers.image.ref.name': 'latest',
        },
        {
          'io.containerd.image.name': 'docker.io/library/busybox:two',
          'org.opencontainers.image.ref.name': 'two',
        },
      ],
    );
    // the layer tarball is the one imported, byte for byte
    assert.ok(
      execFileSync('tar', ['-xOf', file, `blobs/sha256/${diff}`], { maxBuffer: 1 << 26 }).equals(
        busyboxLayer,
      ),
    );

    const since = Math.floor(Date.now() / 1000) - 1;
    await ok('rmi', 'busybox:latest', 'busybox:two');
    assert.equal(await ok('load', '-i', file), 'Loaded image: busybox:latest\nLoaded image: busybox:two');
    assert.equal(await ok('image', 'inspect', '--format', '{{.Id}}', 'busybox:two'), busyboxId);
    assert.equal(await ok('run', '--rm', 'busybox', 'echo', 'loaded'), 'loaded');
    const events = await engine.events(since, '{{.Action}} {{.Actor.Attributes.name}}', ['type=image']);
    const fromSave = events.slice(events.indexOf(`save ${busyboxId}`)).split('\n');
    // load tags without `tag` events, as dockerd
    assert.deepEqual(fromSave, [
      `save ${busyboxId}`,
      `untag ${busyboxId}`,
      `untag ${busyboxId}`,
      `delete ${busyboxId}`,
      `load ${busyboxId}`,
    ]);
  });

  it('answers Loading layer progress unless quiet, and applies no layer that is there already', async () => {
    const archive = dockerArchive([{ layers: [busyboxLayer], tags: ['progress:1'] }]);
    await ok('rmi', '-f', 'busybox:latest', 'busybox:two');
    const loud = await load(archive, 'quiet=0');
    const progress = loud.filter((m) => m.status === 'Loading layer');
    assert.ok(progress.length >= 1, JSON.stringify(loud));
    assert.equal(progress[0]?.id, sha256(busyboxLayer).slice(7, 19));
    assert.deepEqual(progress.at(-1)?.progressDetail, {
      current: busyboxLayer.length,
      total: busyboxLayer.length,
    });
    assert.deepEqual(loud.at(-1), { stream: 'Loaded image: progress:1\n' });
    // dockerd's default is quiet; the layer exists now: no progress either way
    assert.deepEqual(await load(archive, ''), [{ stream: 'Loaded image: progress:1\n' }]);
    assert.deepEqual(await load(archive, 'quiet=0'), [{ stream: 'Loaded image: progress:1\n' }]);
    // docker load -q
    await ok('rmi', 'progress:1');
    const file = join(work, 'progress.tar');
    await writeFile(file, archive);
    const q = await engine.docker(['load', '-q', '-i', file]);
    assert.equal(q.code, 0, q.stderr);
    assert.equal(q.stdout.trim(), 'Loaded image: progress:1');
    busyboxId = await ensureBusybox(engine);
    await ok('tag', 'busybox', 'busybox:two');
  });

  it('loads several images with several layers from one archive, and saves them back together', async () => {
    const extra = layerTar({ 'etc/': '', 'etc/extra.txt': 'second layer\n' });
    const archive = dockerArchive([
      { layers: [busyboxLayer], config: imageConfig([busyboxLayer], { comment: 'one' }), tags: ['multi:a'] },
      { layers: [busyboxLayer, extra], tags: ['multi:b', 'other/multi:c'] },
    ]);
    const out = await load(archive);
    assert.deepEqual(out, [
      { stream: 'Loaded image: multi:a\n' },
      { stream: 'Loaded image: multi:b\n' },
      { stream: 'Loaded image: other/multi:c\n' },
    ]);
    assert.equal(await ok('run', '--rm', 'multi:b', 'cat', '/etc/extra.txt'), 'second layer');
    const ids = [
      await ok('inspect', '-f', '{{.Id}}', 'multi:a'),
      await ok('inspect', '-f', '{{.Id}}', 'multi:b'),
    ];
    assert.equal(ids[1], sha256(imageConfig([busyboxLayer, extra])));

    const file = join(work, 'multi.tar');
    await ok('save', '-o', file, 'multi:a', 'multi:b', 'other/multi');
    const names = members(file);
    // the shared layer once
    assert.equal(names.filter((n) => n === `blobs/sha256/${sha256(busyboxLayer).slice(7)}`).length, 1);
    await ok('rmi', 'multi:a', 'multi:b', 'other/multi:c');
    // compressed as dockerd accepts it
    const gz = join(work, 'multi.tar.gz');
    await writeFile(gz, gzipSync(await readFile(file)));
    const loaded = await ok('load', '-i', gz);
    assert.deepEqual(loaded.split('\n').sort(), [
      'Loaded image: multi:a',
      'Loaded image: multi:b',
      'Loaded image: other/multi:c',
    ]);
    assert.deepEqual(
      [
        await ok('inspect', '-f', '{{.Id}}', 'multi:a'),
        await ok('inspect', '-f', '{{.Id}}', 'other/multi:c'),
      ],
      ids,
    );
    assert.equal(await ok('run', '--rm', 'other/multi:c', 'cat', '/etc/extra.txt'), 'second layer');
  });

  it('loads plain OCI layouts (skopeo oci-archive): tagged by ref.name, else by ID', async () => {
    requireTool('skopeo', "skopeo is needed (Debian's skopeo package)");
    const file = join(work, 'for-oci.tar');
    await ok('save', '-o', file, 'busybox:two');
    const tagged = join(work, 'oci-tagged.tar');
    const untagged = join(work, 'oci-untagged.tar');
    execFileSync('skopeo', [
      'copy',
      '-q',
      `docker-archive:${file}`,
      `oci-archive:${tagged}:oci/busybox:skopeo`,
    ]);
    execFileSync('skopeo', ['copy', '-q', `docker-archive:${file}`, `oci-archive:${untagged}`]);
    assert.ok(members(tagged).includes('index.json'));
    assert.ok(!members(tagged).includes('manifest.json'));
    assert.equal(await ok('load', '-i', tagged), 'Loaded image: oci/busybox:skopeo');
    assert.equal(await ok('run', '--rm', 'oci/busybox:skopeo', 'echo', 'oci'), 'oci');
    const id = await ok('inspect', '-f', '{{.Id}}', 'oci/busybox:skopeo');
    await ok('rmi', 'oci/busybox:skopeo');
    assert.equal(await ok('load', '-i', untagged), `Loaded image ID: ${id}`);
    assert.equal(await ok('run', '--rm', id, 'echo', 'by-id'), 'by-id');
    await ok('rmi', id);
  });

  it("loads this platform's image of a multi-platform OCI index, or the one `platform` asks for", async () => {
    const arch = await ok('image', 'inspect', '-f', '{{.Architecture}}', 'busybox');
    const other = arch === 'arm64' ? 'amd64' : 'arm64';
    const blobs: Buffer[] = [];
    const put = (b: Buffer) => {
      blobs.push(b);
      return { digest: sha256(b), size: b.length };
    };
    const image = (a: string) => {
      const layer = layerTar({ 'etc/': '', [`etc/${a}.txt`]: `${a}\n` });
      const config = imageConfig([layer], { architecture: a });
      const manifest = Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...put(config) },
          layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...put(gzipSync(layer)) }],
        }),
      );
      return {
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        ...put(manifest),
        platform: { os: 'linux', architecture: a },
      };
    };
    const index = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [image(other), image(arch)],
      }),
    );
    const top = { mediaType: 'application/vnd.oci.image.index.v1+json', ...put(index) };
    const layout = tarOf([
      { name: 'oci-layout', data: '{"imageLayoutVersion":"1.0.0"}' },
      ...blobs.map((b) => ({ name: `blobs/sha256/${sha256(b).slice(7)}`, data: b })),
      {
        name: 'index.json',
        data: JSON.stringify({
          schemaVersion: 2,
          manifests: [
            { ...top, annotations: { 'io.containerd.image.name': 'docker.io/library/multiarch:1' } },
          ],
        }),
      },
    ]);
    assert.deepEqual(await load(layout), [{ stream: 'Loaded image: multiarch:1\n' }]);
    assert.equal(await ok('image', 'inspect', '-f', '{{.Architecture}}', 'multiarch:1'), arch);
    const platform = encodeURIComponent(JSON.stringify({ os: 'linux', architecture: other }));
    const out = await load(layout, `quiet=1&platform=${platform}`);
    assert.equal(out.length, 2, JSON.stringify(out));
    assert.match(String(out[0]?.stream), /already exists, renaming the old one/);
    assert.equal(await ok('image', 'inspect', '-f', '{{.Architecture}}', 'multiarch:1'), other);
    await ok('rmi', 'multiarch:1');
  });

  it('saves a layer kept compressed as its uncompressed tarball (also when its record predates tarSize)', async () => {
    const layer = layerTar({ 'etc/': '', 'etc/gzipped.txt': 'kept as gzip\n'.repeat(1000) });
    const gz = join(work, 'layer.tar.gz');
    await writeFile(gz, gzipSync(layer));
    const id = await ok('import', gz, 'gzipped:1');
    const diff = sha256(layer).slice(7);
    const check = async (what: string) => {
      const file = join(work, 'gzipped.tar');
      await ok('save', '-o', file, 'gzipped:1');
      const saved = execFileSync('tar', ['-xOf', file, `blobs/sha256/${diff}`], { maxBuffer: 1 << 26 });
      assert.equal(sha256(saved), sha256(layer), what);
    };
    await check('with tarSize');
    // a layer record written before tarSize existed: counted first
    const record = join(engine.dataRoot, 'image/snapshots/layers', `${diff}.json`);
    const { tarSize: _gone, ...older } = JSON.parse(await readFile(record, 'utf8'));
    assert.equal(older.blob.compression, 'gzip');
    await writeFile(record, JSON.stringify(older));
    await engine.restart();
    await check('without tarSize');
    await ok('rmi', id);
  });

  it('answers 404 before anything is sent for a name it does not have, as dockerd', async () => {
    for (const [path, message] of [
      ['/v1.51/images/nosuch/get', 'No such image: nosuch'],
      ['/v1.51/images/nosuch:1/get', 'reference does not exist'],
      ['/v1.51/images/get?names=busybox&names=nosuch:1', 'reference does not exist'],
      [`/v1.51/images/get?names=${'0'.repeat(64)}`, `No such image: ${'0'.repeat(64)}`],
    ] as const) {
      const r = await engine.request('GET', path);
      assert.equal(r.status, 404, path);
      assert.deepEqual(r.json(), { message }, path);
    }
    const bad = await engine.request('GET', '/v1.51/images/get?names=Bad!Name');
    assert.equal(bad.status, 400);
    const none = await engine.request('GET', '/v1.51/images/get');
    assert.equal(none.status, 200);
  });

  it('saves and loads for one platform (API 1.48 `platform`)', async () => {
    const arch = await ok('image', 'inspect', '-f', '{{.Architecture}}', 'busybox');
    const other = arch === 'arm64' ? 'amd64' : 'arm64';
    const file = join(work, 'platform.tar');
    await ok('save', '--platform', `linux/${arch}`, '-o', file, 'busybox:two');
    const wrong = await engine.docker([
      'save',
      '--platform',
      `linux/${other}`,
      '-o',
      join(work, 'no.tar'),
      'busybox:two',
    ]);
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, new RegExp(`no suitable export target found for platform linux/${other}`));
    const two = (p: string) => encodeURIComponent(JSON.stringify({ os: 'linux', architecture: p }));
    const many = await engine.request(
      'GET',
      `/v1.51/images/get?names=busybox&platform=${two(arch)}&platform=${two(arch)}`,
    );
    assert.equal(many.status, 400);
    // the archive's images for another platform are skipped
    const archive = await readFile(file);
    await ok('tag', 'busybox:two', 'busybox:keep');
    await ok('rmi', 'busybox:two');
    assert.deepEqual(await load(archive, `quiet=1&platform=${two(other)}`), []);
    assert.equal((await engine.docker(['image', 'inspect', 'busybox:two'])).code, 1);
    assert.deepEqual(await load(archive, `quiet=1&platform=${two(arch)}`), [
      { stream: 'Loaded image: busybox:two\n' },
    ]);
    await ok('rmi', 'busybox:keep');
  });

  it('cuts the connection when a stored layer is not what its diff ID says', async () => {
    const layer = layerTar({ 'corrupt.txt': 'the real content\n' });
    await load(dockerArchive([{ layers: [busyboxLayer, layer], tags: ['corrupt:1'] }]));
    const blob = join(engine.dataRoot, 'content/blobs/sha256', sha256(layer).slice(7));
    const bytes = await readFile(blob);
    const at = bytes.indexOf('the real');
    bytes.write('THE REAL', at);
    await writeFile(blob, bytes);
    const r = await engine.docker(['save', '-o', join(work, 'corrupt.tar'), 'corrupt:1']);
    assert.notEqual(r.code, 0, r.stdout);
    // the engine goes on, and says why
    assert.equal(await ok('run', '--rm', 'busybox', 'echo', 'still'), 'still');
    assert.match(engine.log(), /save failed.*is corrupt: its stored tarball hashes to/);
    await ok('rmi', 'corrupt:1');
  });

  it('refuses an upload declared over its limit before reading it (413), and forgets a client that leaves', async () => {
    const c = await RawConnection.open({ path: engine.socket });
    c.write(
      'POST /v1.51/images/load?quiet=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-tar\r\n' +
        `Content-Length: ${80 * 1024 ** 3}\r\n\r\n`,
    );
    assert.ok(
      await c.waitFor(/\r\n\r\n\{"message":"image archive is larger than the engine accepts/, 5_000),
      c.text(),
    );
    assert.equal(c.status(), 413);
    c.destroy();

    // half an archive, then gone: the spool goes, nothing is stored
    const before = await stored();
    const archive = dockerArchive([
      { layers: [busyboxLayer, layerTar({ 'gone.txt': 'x' })], tags: ['gone:1'] },
    ]);
    const half = await RawConnection.open({ path: engine.socket });
    half.write(
      'POST /v1.51/images/load?quiet=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-tar\r\n' +
        `Content-Length: ${archive.length}\r\n\r\n`,
    );
    half.write(archive.subarray(0, archive.length >> 1));
    await eventually(
      'the load to spool',
      async () => (await readdir(join(engine.dataRoot, 'tmp'))).length > 0,
    );
    half.destroy();
    await eventually('the spool to go', async () => (await stored()) === before);
  });

  describe('hostile archives: refused in the stream, nothing stored', () => {
    const marker = `berth-hostile-load-${process.pid}`;

    async function refused(body: Buffer, pattern: RegExp): Promise<void> {
      const before = await stored();
      const out = await load(body);
      const last = out.at(-1) as { error?: string };
      assert.match(last.error ?? JSON.stringify(out), pattern);
      assert.doesNotMatch(last.error ?? '', /\/tmp\/berth-test|\/overlay\//);
      assert.equal(await stored(), before);
    }

    it('archives that try to escape, link out, or hold devices', async () => {
      const tars = hostileTars(marker);
      // cases that hold nothing hostile for an image archive are refused for what they lack
      for (const name of Object.keys(tars) as HostileCase[]) {
        await refused(tars[name], /invalid image archive|cannot load/);
      }
      assert.deepEqual(await markedOnHost(marker), []);
    });

    it('manifests that name what is not there, or lie about digests and sizes', async () => {
      const extra = layerTar({ 'x.txt': 'x' });
      const good = { layers: [busyboxLayer, extra], tags: ['hostile:1'] };
      const manifestOf = (m: unknown) => tarOf([{ name: 'manifest.json', data: JSON.stringify(m) }]);
      await refused(manifestOf([{ Config: '../../etc/passwd', RepoTags: [], Layers: [] }]), /does not hold/);
      await refused(manifestOf([{ Config: '/etc/passwd', RepoTags: [], Layers: [] }]), /does not hold/);
      await refused(manifestOf({ not: 'a list' }), /not a list/);
      // a config that is not what its blob name says
      const config = imageConfig(good.layers);
      await refused(
        tarOf([
          { name: `blobs/sha256/${'1'.repeat(64)}`, data: config },
          {
            name: 'manifest.json',
            data: JSON.stringify([{ Config: `blobs/sha256/${'1'.repeat(64)}`, Layers: [] }]),
          },
        ]),
        /does not hold what its name says/,
      );
      // a layer whose content is not the diff ID the config says: applied, refused, removed
      await refused(
        dockerArchive([
          { ...good, config: imageConfig([busyboxLayer, layerTar({ 'y.txt': 'y' })]), layerBlobs: undefined },
        ]),
        /invalid diffID for layer 1/,
      );
      // a layer stored under a name that is not its digest
      await refused(
        tarOf([
          { name: `blobs/sha256/${sha256(extra).slice(7)}`, data: layerTar({ 'other.txt': 'o' }) },
          { name: 'c.json', data: imageConfig([extra]) },
          {
            name: 'manifest.json',
            data: JSON.stringify([{ Config: 'c.json', Layers: [`blobs/sha256/${sha256(extra).slice(7)}`] }]),
          },
        ]),
        /does not hold what its name says/,
      );
      await refused(
        dockerArchive([{ layers: [extra], config: imageConfig([extra, extra]) }]),
        /layers length mismatch/,
      );
      await refused(
        dockerArchive([{ layers: [extra], config: imageConfig([extra], { os: 'windows' }) }]),
        /cannot load windows image/,
      );
      await refused(dockerArchive([{ layers: [extra], tags: ['Bad:Tag!'] }]), /invalid|repository name/);
      // a config too large to be read
      await refused(
        dockerArchive([
          { layers: [extra], config: imageConfig([extra], { comment: 'c'.repeat(17 * 1024 * 1024) }) },
        ]),
        /too large/,
      );
      // OCI layouts: a blob that is not its digest, a descriptor that lies about the size
      const layout = (manifest: unknown, blobs: Buffer[]) => {
        const m = Buffer.from(JSON.stringify(manifest));
        return tarOf([
          { name: 'oci-layout', data: '{"imageLayoutVersion":"1.0.0"}' },
          ...blobs.map((b) => ({ name: `blobs/sha256/${sha256(b).slice(7)}`, data: b })),
          { name: `blobs/sha256/${sha256(m).slice(7)}`, data: m },
          {
            name: 'index.json',
            data: JSON.stringify({
              schemaVersion: 2,
              manifests: [
                {
                  mediaType: 'application/vnd.oci.image.manifest.v1+json',
                  digest: sha256(m),
                  size: m.length,
                },
              ],
            }),
          },
        ]);
      };
      const c = imageConfig([extra]);
      const desc = (b: Buffer, size = b.length) => ({
        mediaType: 'application/vnd.oci.image.layer.v1.tar',
        digest: sha256(b),
        size,
      });
      await refused(
        layout({ schemaVersion: 2, config: desc(c), layers: [desc(extra, 3)] }, [c, extra]),
        /its descriptor says 3/,
      );
      await refused(
        layout({ schemaVersion: 2, config: desc(c), layers: [desc(extra)] }, [c]),
        /does not hold/,
      );
    });

    it('layers that try to write outside themselves', async () => {
      const tars = hostileTars(marker);
      for (const name of [
        'dotdot',
        'hardlinkUp',
        'symlinkUpThenWrite',
        'whiteoutBelowSymlink',
      ] as HostileCase[]) {
        const layer = tars[name];
        await refused(
          dockerArchive([{ layers: [busyboxLayer, layer], tags: ['hostile:layer'] }]),
          /invalid layer/,
        );
      }
      assert.deepEqual(await markedOnHost(marker), []);
    });
  });
});
