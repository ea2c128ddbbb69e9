/**
 * docker push through berth (POST /images/{name}/push) with the docker CLI, to berth's registry
 * (open, htpasswd, token server) and to Debian's docker-registry (open, htpasswd); Debian's
 * dockerd pulls what berth pushed with the same digests. Also: re-push (`Layer already exists`),
 * cross-repository mounts, all tags, maxConcurrentUploads (`Waiting`), the progress stream's
 * JSON form, errors before and after streaming, RepoDigests and the push event, a client that
 * goes away.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pack } from 'tar-stream';
import { Logger } from '../../../src/common/log.js';
import { Acl } from '../../../src/registry/auth/acl.js';
import { Htpasswd } from '../../../src/registry/auth/htpasswd.js';
import { ensureSigningKeyPair } from '../../../src/registry/auth/keys.js';
import { TokenServer } from '../../../src/registry/auth/token-server.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import {
  ALL_MANIFEST_TYPES,
  AUTH_NONE,
  http,
  registryHost,
  requireTool,
  sha256,
  TestRegistries,
  type TestRegistry,
  tarGz,
} from '../../helpers/registry.js';
import { type ReferenceRegistry, startReferenceRegistry } from '../../helpers/registry-reference.js';

type Running = TestRegistry;

let work: string;
let users: string;
let engine: TestEngine;
let dockerd: ReferenceDockerd;
const berthRegs = new TestRegistries();
let open: Running;
let basic: Running;
let token: Running;
let debian: ReferenceRegistry;
let debianBasic: ReferenceRegistry;
let debianToken: ReferenceRegistry;
let tokenHttp: Server;

const hostOf = registryHost;

/** The manifest digest docker prints at the end of a push (`<tag>: digest: sha256:.. size: N`). */
function pushedDigest(output: string, tag = '[^:]+'): string {
  const m = new RegExp(`${tag}: digest: (sha256:[0-9a-f]{64}) size: \\d+`).exec(output);
  assert.ok(m, `no digest in the push output:\n${output}`);
  return m[1] as string;
}

function lines(text: string): Array<Record<string, unknown>> {
  return text
    .split(/\r?\n/)
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A docker schema 2 image of three gzip layers pushed straight to a registry (no engine). */
async function pushThreeLayers(base: string, name: string, tag: string): Promise<string[]> {
  const layers: Buffer[] = [];
  const diffIds: string[] = [];
  for (let i = 0; i < 3; i++) {
    const files = { [`layer${i}.txt`]: `layer ${i} ${randomBytes(8).toString('hex')}` };
    const gz = await tarGz(files);
    layers.push(gz);
    diffIds.push(sha256(execFileSync('gzip', ['-dc'], { input: gz })));
  }
  const config = JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: { Cmd: ['sh'] },
    rootfs: { type: 'layers', diff_ids: diffIds },
    history: diffIds.map(() => ({ created_by: 'test' })),
  });
  const put = async (data: Buffer | string) => {
    const start = await http('POST', `${base}/v2/${name}/blobs/uploads/`);
    const loc = new URL(start.headers.get('location') ?? '', base);
    loc.searchParams.set('digest', sha256(data));
    const r = await http('PUT', loc.href, {
      body: data,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(r.status, 201, r.text());
    return sha256(data);
  };
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: {
      mediaType: 'application/vnd.docker.container.image.v1+json',
      size: Buffer.byteLength(config),
      digest: await put(config),
    },
    layers: await Promise.all(
      layers.map(async (l) => ({
        mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
        size: l.length,
        digest: await put(l),
      })),
    ),
  };
  const r = await http('PUT', `${base}/v2/${name}/manifests/${tag}`, {
    body: JSON.stringify(manifest),
    headers: { 'Content-Type': manifest.mediaType },
  });
  assert.equal(r.status, 201, r.text());
  return diffIds;
}

before(async () => {
  requireTool('dockerd', "Debian's docker.io package is needed (scripts/install-deps.sh)");
  requireTool('htpasswd', 'htpasswd is needed (apache2-utils, scripts/install-deps.sh)');
  work = await mkdtemp(join(tmpdir(), 'berth-push-'));
  users = join(work, 'htpasswd');
  execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
  open = await berthRegs.start();
  basic = await berthRegs.start({ auth: { htpasswd: { realm: 'berth-test', path: users } } });
  token = await berthRegs.start({ berth: { tokenserver: { enabled: true, htpasswd: users } } });
  debian = await startReferenceRegistry(await mkdtemp(join(work, 'debian-')));
  debianBasic = await startReferenceRegistry(await mkdtemp(join(work, 'debian-basic-')), { htpasswd: users });
  // Debian's registry with token auth: berth's token server as the external one (RS256, rootcertbundle)
  const keys = await ensureSigningKeyPair(join(work, 'token-keys'), 'RS256');
  const quiet = new Logger('error');
  const tokens = new TokenServer({
    issuer: 'push-test-issuer',
    service: 'push-test-registry',
    privateKey: createPrivateKey(await readFile(keys.keyPath, 'utf8')),
    htpasswd: new Htpasswd(users, { log: quiet }),
    acl: new Acl([]),
    log: quiet,
  });
  tokenHttp = createServer((req, res) => void tokens.handle(req, res));
  await new Promise<void>((r) => tokenHttp.listen(0, '127.0.0.1', r));
  debianToken = await startReferenceRegistry(await mkdtemp(join(work, 'debian-token-')), {
    token: {
      realm: `http://127.0.0.1:${(tokenHttp.address() as AddressInfo).port}/token`,
      service: 'push-test-registry',
      issuer: 'push-test-issuer',
      rootcertbundle: keys.certPath,
    },
  });
  engine = await TestEngine.start({ bridge: 'none', args: ['--max-concurrent-uploads', '2'] });
  await ensureBusybox(engine);
  dockerd = await ReferenceDockerd.start({
    insecureRegistries: [
      ...berthRegs.all.map(hostOf),
      debian.hostPort,
      debianBasic.hostPort,
      debianToken.hostPort,
    ],
  });
});

after(async () => {
  await engine?.destroy();
  await dockerd?.destroy();
  await berthRegs.stopAll();
  await debian?.stop();
  await debianBasic?.stop();
  await debianToken?.stop();
  if (tokenHttp) await new Promise<void>((r) => tokenHttp.close(() => r()));
  if (work) await rm(work, { recursive: true, force: true });
});

describe('docker push through berth', () => {
  it("pushes to berth's registry as dockerd words it; re-push finds the layer; another repository mounts it", async () => {
    const host = hostOf(open);
    const id = await engine.dockerOk(['image', 'inspect', '--format', '{{.Id}}', 'busybox']);
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['tag', 'busybox', `${host}/lib/bb:1`]);
    const first = await engine.dockerOk(['push', `${host}/lib/bb:1`]);
    const layer = (/^([0-9a-f]{12}): Preparing$/m.exec(first) ?? [])[1];
    assert.ok(layer, first);
    const digest = pushedDigest(first, '1');
    assert.deepEqual(first.split('\n'), [
      `The push refers to repository [${host}/lib/bb]`,
      `${layer}: Preparing`,
      `${layer}: Pushed`,
      `1: digest: ${digest} size: 527`,
    ]);
    const again = await engine.dockerOk(['push', `${host}/lib/bb:1`]);
    assert.match(again, new RegExp(`${layer}: Layer already exists`));
    assert.equal(pushedDigest(again), digest);

    await engine.dockerOk(['tag', 'busybox', `${host}/other/bb:2`]);
    const mounted = await engine.dockerOk(['push', `${host}/other/bb:2`]);
    assert.match(mounted, new RegExp(`${layer}: Mounted from lib/bb`));
    assert.equal(pushedDigest(mounted), digest);

    // what the registry holds: the manifest under the tag, its config is the image
    const m = await http('GET', `${open.url}/v2/lib/bb/manifests/1`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(m.status, 200);
    assert.equal(m.headers.get('docker-content-digest'), digest);
    assert.equal(m.headers.get('content-type'), 'application/vnd.docker.distribution.manifest.v2+json');
    const manifest = m.json() as { config: { digest: string }; layers: Array<{ mediaType: string }> };
    assert.equal(manifest.config.digest, id);
    assert.equal(manifest.layers[0]?.mediaType, 'application/vnd.docker.image.rootfs.diff.tar.gzip');

    // RepoDigests and the push events, as dockerd records them
    const digests = await engine.dockerOk([
      'image',
      'inspect',
      '--format',
      '{{json .RepoDigests}}',
      `${host}/lib/bb:1`,
    ]);
    assert.ok((JSON.parse(digests) as string[]).includes(`${host}/lib/bb@${digest}`), digests);
    const events = await engine.events(since, '{{.Action}} {{.Actor.ID}} {{.Actor.Attributes.name}}', [
      'type=image',
      'event=push',
    ]);
    assert.deepEqual(events.split('\n'), [
      `push ${host}/lib/bb:1 ${host}/lib/bb`,
      `push ${host}/lib/bb:1 ${host}/lib/bb`,
      `push ${host}/other/bb:2 ${host}/other/bb`,
    ]);

    // dockerd pulls what berth pushed: the same manifest and image ID
    const pulled = await dockerd.dockerOk(['pull', `${host}/lib/bb:1`]);
    assert.match(pulled, new RegExp(`Digest: ${digest}`));
    assert.equal(await dockerd.dockerOk(['image', 'inspect', '--format', '{{.Id}}', `${host}/lib/bb:1`]), id);
    const out = await dockerd.dockerOk([
      'run',
      '--rm',
      '--network',
      'none',
      `${host}/lib/bb:1`,
      'echo',
      'hi',
    ]);
    assert.equal(out, 'hi');

    // and berth pulls it back after forgetting it
    await engine.dockerOk(['rmi', `${host}/lib/bb:1`, `${host}/other/bb:2`]);
    const back = await engine.dockerOk(['pull', `${host}/lib/bb:1`]);
    assert.match(back, new RegExp(`Digest: ${digest}`));
    assert.equal(await engine.dockerOk(['image', 'inspect', '--format', '{{.Id}}', `${host}/lib/bb:1`]), id);
  });

  it("pushes to Debian's docker-registry; dockerd pulls it with the same digest; every tag when none is given", async () => {
    const host = debian.hostPort;
    await engine.dockerOk(['tag', 'busybox', `${host}/bb:a`]);
    await engine.dockerOk(['tag', 'busybox', `${host}/bb:b`]);
    const all = await engine.dockerOk(['push', '--all-tags', `${host}/bb`]);
    const a = pushedDigest(all, 'a');
    assert.equal(pushedDigest(all, 'b'), a);
    assert.match(all, /: Pushed\n/);
    assert.match(all, /: Layer already exists\n/); // the second tag
    const tags = await http('GET', `${debian.url}/v2/bb/tags/list`);
    assert.deepEqual(((tags.json() as { tags: string[] }).tags ?? []).sort(), ['a', 'b']);
    const pulled = await dockerd.dockerOk(['pull', `${host}/bb:b`]);
    assert.match(pulled, new RegExp(`Digest: ${a}`));
  });

  it('streams the JSON messages dockerd sends (progressDetail, aux), Waiting beyond maxConcurrentUploads', async () => {
    const host = hostOf(open);
    const diffIds = await pushThreeLayers(open.url, 'three', 'v1');
    await engine.dockerOk(['pull', `${host}/three:v1`]);
    // to Debian's registry: nothing there, two uploads at once, the third waits
    await engine.dockerOk(['tag', `${host}/three:v1`, `${debian.hostPort}/three:v1`]);
    const res = await engine.request('POST', `/v1.41/images/${debian.hostPort}/three/push?tag=v1`, {
      headers: { 'X-Registry-Auth': AUTH_NONE },
    });
    assert.equal(res.status, 200);
    const msgs = lines(res.text());
    const ids = [...diffIds].reverse().map((d) => d.slice(7, 19));
    assert.deepEqual(msgs[0], { status: `The push refers to repository [${debian.hostPort}/three]` });
    // Preparing for every layer, top first, then the third one waits
    assert.deepEqual(msgs.slice(1, 5), [
      ...ids.map((id) => ({ status: 'Preparing', progressDetail: {}, id })),
      { status: 'Waiting', progressDetail: {}, id: ids[2] },
    ]);
    for (const id of ids)
      assert.ok(
        msgs.some((m) => m.id === id && m.status === 'Pushed'),
        `${id} pushed`,
      );
    const pushing = msgs.find((m) => m.status === 'Pushing') as {
      progressDetail: { current: number };
      progress: string;
    };
    assert.ok(pushing.progressDetail.current > 0);
    assert.match(pushing.progress, /^\[=*>\s*\] +\d/);
    const last = msgs.at(-1) as { aux: { Tag: string; Digest: string; Size: number } };
    assert.equal(last.aux.Tag, 'v1');
    assert.deepEqual(msgs.at(-2), { status: `v1: digest: ${last.aux.Digest} size: ${last.aux.Size}` });
    assert.deepEqual(last, { progressDetail: {}, aux: last.aux });
    // no blob kept at pull (as dockerd): each layer is rebuilt from its tar-split record and
    // gzipped again, so another registry gets the same image with blobs of its own digests
    type Manifest = { config: { digest: string }; layers: Array<{ digest: string }> };
    const src = (
      await http('GET', `${open.url}/v2/three/manifests/v1`, { headers: { Accept: ALL_MANIFEST_TYPES } })
    ).json() as Manifest;
    const dst = (
      await http('GET', `${debian.url}/v2/three/manifests/v1`, { headers: { Accept: ALL_MANIFEST_TYPES } })
    ).json() as Manifest;
    assert.equal(dst.config.digest, src.config.digest);
    assert.equal(dst.layers.length, src.layers.length);
    // another repository of the registry it was pulled from: every layer is mounted from there
    await engine.dockerOk(['tag', `${host}/three:v1`, `${host}/copy:v1`]);
    const copy = await engine.dockerOk(['push', `${host}/copy:v1`]);
    for (const id of ids) assert.match(copy, new RegExp(`${id}: Mounted from three`));
  });

  it('pushes a layer kept as zstd as it is, in an OCI manifest; berth pulls it back', async () => {
    requireTool('zstd', "Debian's zstd package is needed");
    const host = hostOf(open);
    // a layer of its own (the busybox layer is kept as first imported)
    const tar = join(work, 'z.tar');
    await writeFile(
      tar,
      execFileSync('gzip', ['-dc'], { input: await tarGz({ 'z.txt': randomBytes(64).toString('hex') }) }),
    );
    const zst = join(work, 'z.tar.zst');
    execFileSync('zstd', ['-q', '-f', '-o', zst, tar]);
    const id = await engine.dockerOk(['import', zst, `${host}/zstd:1`]);
    const out = await engine.dockerOk(['push', `${host}/zstd:1`]);
    const digest = pushedDigest(out, '1');
    const m = await http('GET', `${open.url}/v2/zstd/manifests/1`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(m.headers.get('content-type'), 'application/vnd.oci.image.manifest.v1+json');
    const manifest = m.json() as {
      config: { mediaType: string };
      layers: Array<{ mediaType: string; digest: string }>;
    };
    assert.equal(manifest.config.mediaType, 'application/vnd.oci.image.config.v1+json');
    assert.deepEqual(
      manifest.layers.map((l) => [l.mediaType, l.digest]),
      [['application/vnd.oci.image.layer.v1.tar+zstd', sha256(await readFile(zst))]],
    );
    await engine.dockerOk(['rmi', `${host}/zstd:1`]);
    const back = await engine.dockerOk(['pull', `${host}/zstd:1`]);
    assert.match(back, new RegExp(`Digest: ${digest}`));
    assert.equal(await engine.dockerOk(['image', 'inspect', '--format', '{{.Id}}', `${host}/zstd:1`]), id);
  });

  it('pushes an image it pulled to another registry; dockerd pulls the same image', async () => {
    const from = hostOf(open);
    const to = debian.hostPort;
    const id = await engine.dockerOk(['import', '-', `${from}/pulled-src:1`], {
      input: await tarGz({ 'p.txt': randomBytes(256).toString('hex') }),
    });
    await engine.dockerOk(['push', `${from}/pulled-src:1`]);
    await engine.dockerOk(['rmi', `${from}/pulled-src:1`]);
    await engine.dockerOk(['pull', `${from}/pulled-src:1`]);
    await engine.dockerOk(['tag', `${from}/pulled-src:1`, `${to}/pulled-copy:1`]);
    const out = await engine.dockerOk(['push', `${to}/pulled-copy:1`]);
    assert.match(out, /: Pushed\n/);
    await dockerd.dockerOk(['pull', `${to}/pulled-copy:1`]);
    assert.equal(
      await dockerd.dockerOk(['image', 'inspect', '--format', '{{.Id}}', `${to}/pulled-copy:1`]),
      id,
    );
  });

  it('logs in and pushes with htpasswd (berth and Debian) and with token servers (berth, Debian + external)', async () => {
    for (const host of [hostOf(basic), debianBasic.hostPort, hostOf(token), debianToken.hostPort]) {
      const tokenAuth = host === hostOf(token) || host === debianToken.hostPort;
      await engine.dockerOk(['tag', 'busybox', `${host}/alice/bb:1`]);
      const denied = await engine.docker(['push', `${host}/alice/bb:1`]);
      assert.notEqual(denied.code, 0, `push without login to ${host} (${tokenAuth}): ${denied.stdout}`);
      assert.match(
        denied.stderr,
        tokenAuth
          ? /denied: requested access to the resource is denied|unauthorized: authentication required/
          : /no basic auth credentials/,
        host,
      );
      const wrong = await engine.docker(['login', '-u', 'alice', '--password-stdin', host], {
        input: 'nope\n',
      });
      assert.notEqual(wrong.code, 0);
      assert.match(
        wrong.stderr,
        new RegExp(
          tokenAuth
            ? `Error response from daemon: Get "http://${host}/v2/": unauthorized: `
            : `Error response from daemon: login attempt to http://${host}/v2/ failed with status: 401 Unauthorized`,
        ),
      );
      const ok = await engine.dockerOk(['login', '-u', 'alice', '--password-stdin', host], {
        input: 'alice-pw\n',
      });
      assert.match(ok, /Login Succeeded/);
      const pushed = await engine.dockerOk(['push', `${host}/alice/bb:1`]);
      assert.match(pushed, /digest: sha256:/);
      // dockerd, logged in the same way, pulls what berth pushed
      await dockerd.dockerOk(['login', '-u', 'alice', '--password-stdin', host], { input: 'alice-pw\n' });
      const pulled = await dockerd.dockerOk(['pull', `${host}/alice/bb:1`]);
      assert.match(pulled, new RegExp(`Digest: ${pushedDigest(pushed)}`));
      await engine.dockerOk(['logout', host]);
    }
  });

  it('answers errors as dockerd: before streaming as statuses, after as stream messages', async () => {
    const host = hostOf(open);
    const noAuth = await engine.request('POST', `/v1.41/images/${host}/lib/bb/push?tag=1`);
    assert.equal(noAuth.status, 400);
    assert.deepEqual(noAuth.json(), { message: 'Bad parameters and missing X-Registry-Auth: EOF' });
    const missing = await engine.request('POST', `/v1.41/images/${host}/nothere/push?tag=1`, {
      headers: { 'X-Registry-Auth': AUTH_NONE },
    });
    assert.equal(missing.status, 200);
    const msg = `An image does not exist locally with the tag: ${host}/nothere`;
    assert.deepEqual(lines(missing.text()), [
      { status: `The push refers to repository [${host}/nothere]` },
      { errorDetail: { message: msg }, error: msg },
    ]);
    await engine.dockerOk(['tag', 'busybox', `${host}/tagged:1`]);
    const noTag = await engine.docker(['push', `${host}/tagged:nope`]);
    assert.equal(noTag.code, 1);
    assert.match(noTag.stderr, new RegExp(`tag does not exist: ${host}/tagged:nope`));
    const bad = await engine.request('POST', '/v1.41/images/UPPER/push', {
      headers: { 'X-Registry-Auth': AUTH_NONE },
    });
    assert.equal(bad.status, 400);
    await engine.dockerOk(['tag', 'busybox', '127.0.0.1:1/bb:1']);
    const unreachable = await engine.docker(['push', '127.0.0.1:1/bb:1']);
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /127\.0\.0\.1:1/);
    await engine.dockerOk(['tag', 'busybox', 'hub-only:1']);
    const hub = await engine.docker(['push', 'hub-only:1']);
    assert.equal(hub.code, 1);
    assert.match(hub.stdout, /The push refers to repository \[docker\.io\/library\/hub-only\]/);
    assert.match(hub.stderr, /no Docker Hub/);
  });

  it('retries an upload whose connection dropped, counting down as dockerd', async () => {
    // a proxy in front of berth's open registry that drops the first blob upload's final PUT
    let dropped = 0;
    const proxy = createServer((req, res) => {
      if (req.method === 'PUT' && req.url?.includes('/blobs/uploads/') && dropped === 0) {
        dropped++;
        req.socket.destroy();
        return;
      }
      const target = new URL(req.url ?? '/', open.url);
      const fwd = httpRequest(target, { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      fwd.on('error', () => res.destroy());
      req.pipe(fwd);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      await engine.dockerOk(['tag', 'busybox', `${host}/retry:1`]);
      const out = await engine.dockerOk(['push', `${host}/retry:1`], { timeoutMs: 60_000 });
      assert.equal(dropped, 1);
      assert.match(out, /: Retrying in 5 seconds\n[\s\S]*: Retrying in 1 second\n[\s\S]*: Pushed\n/);
      assert.match(out, /: Pushed\n/);
      assert.match(out, /1: digest: sha256:/);
      const res = await engine.request('GET', '/v1.41/images/json');
      assert.equal(res.status, 200);
    } finally {
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  });

  it('a client that goes away cancels the push: no manifest is written', async () => {
    const tar = join(work, 'big.tar');
    {
      const p = pack();
      const chunks: Buffer[] = [];
      p.on('data', (c: unknown) => chunks.push(c as Buffer));
      const done = new Promise<void>((r) => p.on('end', () => r()));
      p.entry({ name: 'big.bin', mode: 0o644, mtime: new Date(0) }, randomBytes(48 * 1024 * 1024));
      p.finalize();
      await done;
      await writeFile(tar, Buffer.concat(chunks));
    }
    const host = hostOf(open);
    await engine.dockerOk(['import', tar, `${host}/big:1`]);
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(
        {
          socketPath: engine.socket,
          method: 'POST',
          path: `/v1.41/images/${host}/big/push?tag=1`,
          headers: { 'X-Registry-Auth': AUTH_NONE },
        },
        (res) => {
          res.on('data', (d: Buffer) => {
            if (d.toString().includes('"Pushing"')) {
              req.destroy();
              resolve();
            }
          });
          res.on('end', () => reject(new Error('the push ended before it was cancelled')));
        },
      );
      req.on('error', () => undefined);
      req.end();
    });
    await new Promise((r) => setTimeout(r, 1000));
    const m = await http('GET', `${open.url}/v2/big/manifests/1`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(m.status, 404);
    // the engine goes on: a new push of it completes
    const pushed = await engine.dockerOk(['push', `${host}/big:1`], { timeoutMs: 120_000 });
    assert.match(pushed, /1: digest: sha256:/);
  });
});
