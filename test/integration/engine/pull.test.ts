import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { startRegistry } from '../../../src/registry/index.js';
import { TestEngine } from '../../helpers/engine.js';
import { runCommand } from '../../helpers/process.js';
import {
  buildOciLayout,
  DOCKER_MANIFEST,
  pushBlob,
  pushManifest,
  sha256,
  startTestRegistry,
  type TestRegistry,
  tarGz,
  tempDir,
  waitForHttp,
} from '../../helpers/registry.js';
import { freePort } from '../../helpers/registry-reference.js';
import { makeTestCertificates } from '../../helpers/tls-certs.js';

/** What the proxy in front of the registry does to blob answers. */
interface Faults {
  /** Cut the connection once after this many bytes of a blob (then behave). */
  dropAfter?: number;
  /** Flip the bytes of the answers for this blob. */
  corrupt?: string;
  /** Hold each chunk of blob answers this long (a slow registry). */
  delayMs?: number;
  ranges: string[];
  blobGets: number;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A proxy to `upstream` that can drop or corrupt blob answers. */
function faultyProxy(upstream: string, faults: Faults): Handler {
  const up = new URL(upstream);
  return (req, res) => {
    const fwd = httpRequest(
      { host: up.hostname, port: up.port, path: req.url, method: req.method, headers: req.headers },
      (ur) => {
        const isBlob =
          req.method === 'GET' && /\/blobs\/sha256:/.test(req.url ?? '') && ur.statusCode !== 307;
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        if (!isBlob) {
          ur.pipe(res);
          return;
        }
        faults.blobGets++;
        if (req.headers.range) faults.ranges.push(String(req.headers.range));
        let sent = 0;
        ur.on('data', (c: Buffer) => {
          if (faults.delayMs) {
            ur.pause();
            setTimeout(() => ur.resume(), faults.delayMs);
          }
          const chunk =
            faults.corrupt && req.url?.includes(faults.corrupt) ? Buffer.from(c).map((b) => b ^ 0xff) : c;
          sent += chunk.length;
          res.write(chunk);
          if (faults.dropAfter !== undefined && sent >= faults.dropAfter) {
            faults.dropAfter = undefined;
            ur.destroy();
            res.socket?.destroy();
          }
        });
        ur.on('end', () => res.end());
      },
    );
    fwd.on('error', () => res.destroy());
    req.pipe(fwd);
  };
}

async function listen(server: ReturnType<typeof createHttpServer>): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Push a one-layer docker schema 2 image whose config names the layer's diff ID. */
async function pushLayerImage(
  base: string,
  name: string,
  tag: string,
  layer: Buffer,
  opts: { tar?: Buffer; mediaType?: string } = {},
): Promise<string> {
  const config = JSON.stringify({
    architecture: process.arch === 'arm64' ? 'arm64' : 'amd64',
    os: 'linux',
    config: { Cmd: ['sh'] },
    rootfs: { type: 'layers', diff_ids: [sha256(opts.tar ?? gunzipSync(layer))] },
  });
  const manifest = {
    schemaVersion: 2,
    mediaType: DOCKER_MANIFEST,
    config: {
      mediaType: 'application/vnd.docker.container.image.v1+json',
      digest: await pushBlob(base, name, config),
      size: Buffer.byteLength(config),
    },
    layers: [
      {
        mediaType: opts.mediaType ?? 'application/vnd.docker.image.rootfs.diff.tar.gzip',
        digest: await pushBlob(base, name, layer),
        size: layer.length,
      },
    ],
  };
  const res = await pushManifest(base, name, tag, manifest, DOCKER_MANIFEST);
  assert.equal(res.status, 201, res.text());
  return sha256(JSON.stringify(manifest));
}

/** A random-ish (incompressible) layer of `n` bytes in one file. */
async function bigLayer(n: number, seed: number): Promise<Buffer> {
  const data = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i += 4) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    data.writeUInt32LE(x, i);
  }
  return tarGz({ 'data/blob': data });
}

describe('docker pull', () => {
  let work: string;
  let reg: TestRegistry;
  let host: string;
  let mirror: TestRegistry;
  let engine: TestEngine;
  let certsDir: string;
  const servers: Array<{ close(): void }> = [];
  const faults: Faults = { ranges: [], blobGets: 0 };
  let proxyHost: string;
  let tlsHost: string;

  before(async () => {
    work = await tempDir('berth-pull-');
    reg = await startTestRegistry();
    host = new URL(reg.url).host;
    mirror = await startTestRegistry();
    const proxy = createHttpServer(faultyProxy(reg.url, faults));
    servers.push(proxy);
    proxyHost = await listen(proxy);
    // a TLS front that insists on a client certificate signed by the test CA
    const certs = await makeTestCertificates(join(work, 'certs'));
    const tls = createHttpsServer(
      {
        cert: await readFile(certs.serverCert),
        key: await readFile(certs.serverKey),
        ca: await readFile(certs.ca),
        requestCert: true,
        rejectUnauthorized: true,
      },
      faultyProxy(reg.url, { ranges: [], blobGets: 0 }),
    );
    servers.push(tls);
    tlsHost = await listen(tls as unknown as ReturnType<typeof createHttpServer>);
    certsDir = join(work, 'certs.d');
    await mkdir(join(certsDir, tlsHost), { recursive: true });
    await writeFile(join(certsDir, tlsHost, 'ca.crt'), await readFile(certs.ca));
    await writeFile(
      join(certsDir, tlsHost, 'client.cert'),
      await readFile(join(certs.clientDir, 'cert.pem')),
    );
    await writeFile(join(certsDir, tlsHost, 'client.key'), await readFile(join(certs.clientDir, 'key.pem')));

    const layout = join(work, 'layout');
    await buildOciLayout(layout, {
      refName: 'v1',
      platforms: [
        { os: 'linux', architecture: 'amd64' },
        { os: 'linux', architecture: 'arm64' },
      ],
    });
    const copy = async (dest: string) => {
      const r = await runCommand('skopeo', [
        'copy',
        '--all',
        '--dest-tls-verify=false',
        `oci:${layout}:v1`,
        dest,
      ]);
      assert.equal(r.code, 0, r.stderr);
    };
    await copy(`docker://${host}/multi:v1`);
    await copy(`docker://${host}/multi:v2`);
    await copy(`docker://${host}/multi:v3`);
    await copy(`docker://${new URL(mirror.url).host}/library/mirrored:v1`);
    engine = await TestEngine.start({
      args: [
        '--registry-mirror',
        mirror.url,
        '--registry-certs-dir',
        certsDir,
        '--max-concurrent-downloads',
        '1',
      ],
    });
  });

  after(async () => {
    await engine?.destroy();
    for (const s of servers) s.close();
    await reg?.stop();
    await mirror?.stop();
    await rm(work, { recursive: true, force: true });
  });

  const inspect = async (name: string) => {
    const r = await engine.request('GET', `/v1.41/images/${encodeURIComponent(name)}/json`);
    return { status: r.status, body: r.status === 200 ? (r.json() as Record<string, unknown>) : undefined };
  };
  const layerCount = async () =>
    (await readdir(join(engine.dataRoot, 'image', 'snapshots', 'layers'))).length;

  it('pulls a multi-arch index for this platform, or the one asked for; again is up to date', async () => {
    const out = await engine.dockerOk(['pull', `${host}/multi:v1`]);
    assert.match(out, /v1: Pulling from multi/);
    assert.match(out, /: Waiting\n/, 'one download at a time (--max-concurrent-downloads 1)');
    assert.match(out, /Pull complete/);
    assert.match(out, /Digest: sha256:[0-9a-f]{64}/);
    assert.match(out, new RegExp(`Status: Downloaded newer image for ${host}/multi:v1`));
    const img = (await inspect(`${host}/multi:v1`)).body as { Architecture: string; RepoDigests: string[] };
    assert.equal(img.Architecture, process.arch === 'arm64' ? 'arm64' : 'amd64');
    const digest = /Digest: (sha256:[0-9a-f]{64})/.exec(out)?.[1];
    assert.deepEqual(img.RepoDigests, [`${host}/multi@${digest}`]);
    // the distribution metadata store knows where each layer came from, and as which blob
    const layers = ((await inspect(`${host}/multi:v1`)).body as { RootFS: { Layers: string[] } }).RootFS
      .Layers;
    for (const diffId of layers) {
      const meta = JSON.parse(
        await readFile(
          join(engine.dataRoot, 'image', 'distribution', 'v2metadata-by-diffid', 'sha256', diffId.slice(7)),
          'utf8',
        ),
      ) as Array<{ Digest: string; SourceRepository: string }>;
      assert.ok(
        meta.some((m) => m.SourceRepository === `${host}/multi` && /^sha256:/.test(m.Digest)),
        JSON.stringify(meta),
      );
      const back = await readFile(
        join(
          engine.dataRoot,
          'image',
          'distribution',
          'diffid-by-digest',
          'sha256',
          (meta[0] as { Digest: string }).Digest.slice(7),
        ),
        'utf8',
      );
      assert.equal(back, diffId);
    }
    const again = await engine.dockerOk(['pull', `${host}/multi:v1`]);
    assert.match(again, /Status: Image is up to date/);
    assert.doesNotMatch(again, /Pull complete/);
    const arm = await engine.dockerOk(['pull', '--platform', 'linux/arm64', `${host}/multi:v2`]);
    assert.match(arm, /Already exists/, 'the busybox layer is shared');
    assert.equal(
      ((await inspect(`${host}/multi:v2`)).body as { Architecture: string }).Architecture,
      'arm64',
    );
    // the container runs what was pulled
    const run = await engine.dockerOk([
      'run',
      '--rm',
      `${host}/multi:v1`,
      '/bin/busybox',
      'cat',
      '/etc/marker',
    ]);
    assert.match(run, /berth (amd64|arm64)/);
  });

  it('answers errors before streaming as dockerd does', async () => {
    const tag = await engine.request('POST', `/v1.41/images/create?fromImage=${host}/multi&tag=nope`);
    assert.equal(tag.status, 404);
    assert.match(
      tag.json<{ message: string }>().message,
      new RegExp(`^manifest for ${host}/multi:nope not found: manifest unknown`),
    );
    const repo = await engine.docker(['pull', `${host}/nope`]);
    assert.notEqual(repo.code, 0);
    assert.match(repo.stderr, /manifest for .*\/nope:latest not found/);
    const refused = await engine.request('POST', '/v1.41/images/create?fromImage=127.0.0.1:1/x&tag=latest');
    // dockerd answers 500; berth 503 (an unavailable registry is not the engine's fault), same text
    assert.equal(refused.status, 503);
    assert.match(refused.text(), /127\.0\.0\.1:1\/v2\/.*connection refused/);
    const hubless = await engine.request(
      'POST',
      '/v1.41/images/create?fromImage=nothere.example/x&tag=latest',
    );
    assert.ok(hubless.status >= 400, hubless.text());
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });

  it('pulls docker.io names from the mirror', async () => {
    const out = await engine.dockerOk(['pull', 'mirrored:v1']);
    assert.match(out, /Pulling from library\/mirrored/);
    assert.match(out, /Status: Downloaded newer image for mirrored:v1/, 'a new tag, as dockerd says');
    assert.equal((await inspect('docker.io/library/mirrored:v1')).status, 200);
    const missing = await engine.docker(['pull', 'library/absent:v1']);
    assert.match(missing.stderr, /manifest for absent:v1 not found/);
  });

  it('pulls every tag with --all-tags, and by digest', async () => {
    const out = await engine.dockerOk(['pull', '--all-tags', `${host}/multi`]);
    assert.match(out, /v1: Pulling from multi/);
    assert.match(out, /v2: Pulling from multi/);
    // v2 named the arm64 image: it names this platform's now, a change (dockerd's "newer image")
    assert.match(out, new RegExp(`Status: Downloaded newer image for ${host}/multi\\n`));
    const digest = ((await inspect(`${host}/multi:v1`)).body as { RepoDigests: string[] })
      .RepoDigests[0] as string;
    const id = ((await inspect(digest)).body as { Id: string }).Id;
    await engine.dockerOk(['rmi', '-f', id]);
    assert.equal((await inspect(digest)).status, 404);
    const byDigest = await engine.dockerOk(['pull', digest]);
    assert.ok(byDigest.includes(`Status: Downloaded newer image for ${digest}`), byDigest);
    assert.equal((await inspect(digest)).status, 200);
  });

  it('runs an image it does not have by pulling it (docker run)', async () => {
    const out = await engine.docker([
      'run',
      '--rm',
      `${host}/multi:v2`,
      '/bin/busybox',
      'echo',
      'pulled-and-ran',
    ]);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stderr, /Unable to find image/);
    assert.match(out.stdout, /pulled-and-ran/);
  });

  // a layer above 8 MiB is unpacked on a worker thread (storage/unpack.thread.ts), a smaller one
  // in the engine's thread: both ways are checked where a download can go wrong
  const sizes = [
    ['small', 200_000],
    ['large', 9_000_000],
  ] as const;

  for (const [kind, size] of sizes) {
    it(`rejects a corrupted layer and keeps nothing of it (${kind})`, async () => {
      const layer = await bigLayer(size, 7);
      await pushLayerImage(reg.url, `corrupt/${kind}`, 'v1', layer);
      const before = await layerCount();
      faults.corrupt = sha256(layer);
      try {
        const r = await engine.docker(['pull', `${proxyHost}/corrupt/${kind}:v1`]);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /filesystem layer verification failed for digest/);
      } finally {
        faults.corrupt = undefined;
      }
      assert.equal((await inspect(`${proxyHost}/corrupt/${kind}:v1`)).status, 404);
      assert.equal(await layerCount(), before);
      const ingest = await readdir(join(engine.dataRoot, 'content', 'ingest'));
      assert.deepEqual(ingest, []);
      const tmp = (await readdir(join(engine.dataRoot, 'overlay'))).filter((n) => n.startsWith('tmp-'));
      assert.deepEqual(tmp, []);
    });

    it(`resumes a layer whose connection dropped, with Range (${kind})`, async () => {
      const layer = await bigLayer(size + 2_800_000, 11);
      await pushLayerImage(reg.url, `drop/${kind}`, 'v1', layer);
      faults.ranges.length = 0;
      faults.dropAfter = Math.floor(layer.length / 2);
      const out = await engine.dockerOk(['pull', `${proxyHost}/drop/${kind}:v1`]);
      assert.match(out, /Pull complete/);
      assert.equal(faults.ranges.length, 1);
      assert.match(faults.ranges[0] as string, /^bytes=\d+-$/);
    });
  }

  it('pulls uncompressed and zstd layers', async () => {
    const tar = gunzipSync(await bigLayer(100_000, 3));
    await pushLayerImage(reg.url, 'plain/layer', 'v1', tar, {
      tar,
      mediaType: 'application/vnd.oci.image.layer.v1.tar',
    });
    const zstPath = join(work, 'layer.tar.zst');
    const other = gunzipSync(await bigLayer(100_000, 5));
    await writeFile(join(work, 'layer.tar'), other);
    execFileSync('zstd', ['-q', '-f', join(work, 'layer.tar'), '-o', zstPath]);
    const zstd = await readFile(zstPath);
    await pushLayerImage(reg.url, 'zstd/layer', 'v1', zstd, {
      tar: other,
      mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd',
    });
    for (const name of ['plain/layer', 'zstd/layer']) {
      const out = await engine.dockerOk(['pull', `${host}/${name}:v1`]);
      assert.match(out, /Pull complete/, name);
      assert.equal((await inspect(`${host}/${name}:v1`)).status, 200);
    }
  });

  for (const [kind, size] of [
    ['small', 4_000_000],
    ['large', 9_000_000],
  ] as const)
    it(`cancels when the client goes away, keeping nothing (${kind})`, async () => {
      const layer = await bigLayer(size, 13);
      await pushLayerImage(reg.url, `slow/${kind}`, 'v1', layer);
      const before = await layerCount();
      faults.delayMs = 50;
      try {
        await new Promise<void>((resolve, reject) => {
          const req = httpRequest(
            {
              socketPath: engine.socket,
              method: 'POST',
              path: `/v1.41/images/create?fromImage=${proxyHost}/slow/${kind}&tag=v1`,
            },
            (res) => {
              res.on('data', (c: Buffer) => {
                if (c.toString().includes('Downloading')) {
                  req.destroy();
                  resolve();
                }
              });
              res.on('error', () => undefined);
            },
          );
          req.on('error', () => undefined);
          req.end();
          setTimeout(() => reject(new Error('no Downloading message')), 30_000).unref();
        });
      } finally {
        faults.delayMs = undefined;
      }
      // the pull stops: nothing of it stays (bounded wait)
      let left: string[] = [];
      for (let i = 0; i < 100; i++) {
        left = [
          ...(await readdir(join(engine.dataRoot, 'overlay'))).filter((n) => n.startsWith('tmp-')),
          ...(await readdir(join(engine.dataRoot, 'content', 'ingest'))),
        ];
        if (!left.length) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(left, []);
      assert.equal(await layerCount(), before);
      assert.equal((await inspect(`${proxyHost}/slow/${kind}:v1`)).status, 404);
      assert.equal((await engine.request('GET', '/_ping')).status, 200);
    });

  it('reaches a TLS registry with the CA and client certificate of its certs.d folder', async () => {
    const out = await engine.dockerOk(['pull', `${tlsHost}/multi:v1`]);
    assert.match(out, /Digest: sha256:/);
  });
});

describe('docker pull with authentication', () => {
  let engine: TestEngine;
  let work: string;
  const regs: Array<{ url: string; close(): Promise<void> }> = [];

  before(async () => {
    work = await tempDir('berth-pull-auth-');
    const users = join(work, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
    const start = async (extra: Record<string, unknown>) => {
      const root = join(work, `root-${regs.length}`);
      const r = await startRegistry({
        version: '0.1',
        log: { level: 'error', accesslog: { disabled: true } },
        storage: { filesystem: { rootdirectory: root }, delete: { enabled: true } },
        http: { addr: '127.0.0.1:0' },
        ...extra,
      });
      regs.push(r);
      return r;
    };
    await start({ auth: { htpasswd: { realm: 'test', path: users } } });
    await start({ berth: { tokenserver: { enabled: true, htpasswd: users } } });
    // Debian's docker-registry (distribution 2.8) with htpasswd too
    const port = await freePort();
    const config = join(work, 'debian.yml');
    await writeFile(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: error',
        '  accesslog:',
        '    disabled: true',
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${join(work, 'debian-root')}`,
        'http:',
        `  addr: 127.0.0.1:${port}`,
        'auth:',
        '  htpasswd:',
        '    realm: debian',
        `    path: ${users}`,
        '',
      ].join('\n'),
    );
    const child = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
    const debianUrl = `http://127.0.0.1:${port}`;
    regs.push({
      url: debianUrl,
      close: async () => {
        if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGTERM');
        await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(undefined)));
      },
    });
    await waitForHttp(`${debianUrl}/v2/`, 10_000);
    const layout = join(work, 'layout');
    await buildOciLayout(layout, { refName: 'v1' });
    for (const r of regs) {
      const res = await runCommand('skopeo', [
        'copy',
        '--dest-tls-verify=false',
        '--dest-creds',
        'alice:alice-pw',
        `oci:${layout}:v1`,
        `docker://${new URL(r.url).host}/team/app:v1`,
      ]);
      assert.equal(res.code, 0, res.stderr);
    }
    engine = await TestEngine.start();
  });

  after(async () => {
    await engine?.destroy();
    for (const r of regs) await r.close();
    await rm(work, { recursive: true, force: true });
  });

  const authHeader = (o: Record<string, string>) => Buffer.from(JSON.stringify(o)).toString('base64url');

  for (const [i, kind] of ['basic', 'token', 'debian'].entries()) {
    it(`pulls from a registry with ${kind} auth with X-Registry-Auth, and refuses without`, async () => {
      const h = new URL((regs[i] as { url: string }).url).host;
      const anon = await engine.request('POST', `/v1.41/images/create?fromImage=${h}/team/app&tag=v1`);
      // dockerd's words (its statuses are 500s here; berth answers 401, and 404 as dockerd for
      // no read access)
      if (kind === 'basic' || kind === 'debian') {
        assert.equal(anon.status, 401, anon.text());
        assert.match(anon.text(), /manifests\/v1\\": no basic auth credentials/);
      } else {
        assert.equal(anon.status, 404, anon.text());
        assert.match(
          anon.text(),
          /pull access denied for .*\/team\/app, repository does not exist or may require 'docker login'/,
        );
      }
      const wrong = await engine.request('POST', `/v1.41/images/create?fromImage=${h}/team/app&tag=v1`, {
        headers: { 'X-Registry-Auth': authHeader({ username: 'alice', password: 'nope' }) },
      });
      assert.equal(wrong.status, 401, wrong.text());
      assert.match(wrong.text(), /unauthorized: (invalid username or password|authentication required)/);
      // the docker CLI sends what its config file holds
      await mkdir(engine.dockerConfig, { recursive: true });
      await writeFile(
        join(engine.dockerConfig, 'config.json'),
        JSON.stringify({ auths: { [h]: { auth: Buffer.from('alice:alice-pw').toString('base64') } } }),
      );
      const out = await engine.dockerOk(['pull', `${h}/team/app:v1`]);
      assert.match(out, /Status: Downloaded newer image for /);
      assert.equal((await engine.request('GET', `/v1.41/images/${h}/team/app:v1/json`)).status, 200);
    });
  }
});
