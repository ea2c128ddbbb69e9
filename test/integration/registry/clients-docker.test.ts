/**
 * Real clients against berth's registry: Debian's dockerd (docker.io 20.10, pushing and pulling
 * through the daemon), its docker CLI (`login`, `manifest inspect`) and containerd's `ctr`
 * (containerd 1.6's resolver and pusher) on dockerd's managed containerd. One dockerd for the
 * file; registries run in-process on loopback ports with temporary roots.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeBusyboxTarball } from '../../../src/engine/images/seed.js';
import { startRegistry } from '../../../src/registry/index.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { ALL_MANIFEST_TYPES, buildOciLayout, http, requireTool, skopeo } from '../../helpers/registry.js';

type Running = Awaited<ReturnType<typeof startRegistry>>;

const SEED = 'berth-clients/busybox:seed';

let work: string;
let users: string;
let dockerd: ReferenceDockerd;
const registries: Running[] = [];
let open: Running;
let basic: Running;
let token: Running;

const hostOf = (r: Running) => new URL(r.url).host;

async function start(name: string, extra: Record<string, unknown> = {}): Promise<Running> {
  const root = await mkdtemp(join(work, `${name}-`));
  const reg = await startRegistry({
    version: '0.1',
    log: { level: 'error', accesslog: { disabled: true } },
    storage: { filesystem: { rootdirectory: root }, delete: { enabled: true } },
    http: { addr: '127.0.0.1:0' },
    ...extra,
  });
  registries.push(reg);
  return reg;
}

/** The manifest digest docker prints at the end of a push (`<tag>: digest: sha256:.. size: N`). */
function pushedDigest(output: string): string {
  const m = /digest: (sha256:[0-9a-f]{64}) size: \d+/.exec(output);
  assert.ok(m, `no digest in the push output:\n${output}`);
  return m[1] as string;
}

before(async () => {
  requireTool('dockerd', "Debian's docker.io package is needed (scripts/install-deps.sh)");
  requireTool('ctr', "containerd's ctr is needed (Debian's containerd package, scripts/install-deps.sh)");
  requireTool('htpasswd', 'htpasswd is needed (apache2-utils, scripts/install-deps.sh)');
  work = await mkdtemp(join(tmpdir(), 'berth-clients-docker-'));
  users = join(work, 'htpasswd');
  execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
  open = await start('open');
  basic = await start('basic', { auth: { htpasswd: { realm: 'berth-test', path: users } } });
  token = await start('token', { berth: { tokenserver: { enabled: true, htpasswd: users } } });
  dockerd = await ReferenceDockerd.start({ insecureRegistries: registries.map(hostOf) });
  const tarball = await writeBusyboxTarball(join(work, 'busybox.tar'));
  await dockerd.dockerOk(['import', '--change', 'CMD ["sh"]', tarball, SEED]);
});

after(async () => {
  await dockerd?.destroy();
  for (const r of registries) await r.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('docker (Debian dockerd 20.10) against berth', () => {
  let digest: string;

  it('pushes two tags, lists them, pulls back, runs, pulls by digest, inspects', async () => {
    const host = hostOf(open);
    const ref = `${host}/lib/busybox`;
    await dockerd.dockerOk(['tag', SEED, `${ref}:1`]);
    const first = await dockerd.dockerOk(['push', `${ref}:1`]);
    assert.match(first, /Pushed/);
    digest = pushedDigest(first);

    // The second tag: docker finds the layer there already and only puts the manifest.
    await dockerd.dockerOk(['tag', SEED, `${ref}:2`]);
    const second = await dockerd.dockerOk(['push', `${ref}:2`]);
    assert.match(second, /Layer already exists/);
    assert.equal(pushedDigest(second), digest);

    // Another repository of the same registry: docker mounts the layer from lib/busybox.
    await dockerd.dockerOk(['tag', SEED, `${host}/other/busybox:1`]);
    const third = await dockerd.dockerOk(['push', `${host}/other/busybox:1`]);
    assert.match(third, /Mounted from lib\/busybox/);
    assert.equal(pushedDigest(third), digest);

    const catalog = await http('GET', `${open.url}/v2/_catalog`);
    assert.deepEqual(catalog.json(), { repositories: ['lib/busybox', 'other/busybox'] });
    const tags = await http('GET', `${open.url}/v2/lib/busybox/tags/list`);
    assert.deepEqual(tags.json(), { name: 'lib/busybox', tags: ['1', '2'] });
    const manifest = await http('GET', `${open.url}/v2/lib/busybox/manifests/1`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(manifest.status, 200);
    assert.equal(manifest.headers.get('docker-content-digest'), digest);
    assert.equal(
      manifest.headers.get('content-type'),
      'application/vnd.docker.distribution.manifest.v2+json',
    );

    await dockerd.dockerOk(['rmi', `${ref}:1`, `${ref}:2`, `${host}/other/busybox:1`]);
    const pulled = await dockerd.dockerOk(['pull', `${ref}:1`]);
    assert.match(pulled, new RegExp(`Digest: ${digest}`));
    assert.match(pulled, /Downloaded newer image/);
    const out = await dockerd.dockerOk([
      'run',
      '--rm',
      '--network',
      'none',
      `${ref}:1`,
      'sh',
      '-c',
      'echo pulled-$((6*7))',
    ]);
    assert.equal(out, 'pulled-42');

    await dockerd.dockerOk(['rmi', `${ref}:1`]);
    const missing = await dockerd.docker(['pull', `${ref}:missing`]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /manifest unknown/);
    const byDigest = await dockerd.dockerOk(['pull', `${ref}@${digest}`]);
    assert.match(byDigest, new RegExp(`Digest: ${digest}`));
    const ids = await dockerd.dockerOk(['images', '--digests', '--format', '{{.Repository}}@{{.Digest}}']);
    assert.match(ids, new RegExp(`${ref.replace(/\./g, '\\.')}@${digest}`));

    const inspected = JSON.parse(
      await dockerd.dockerOk(['manifest', 'inspect', '--insecure', `${ref}:2`]),
    ) as {
      mediaType: string;
      layers: Array<{ digest: string }>;
    };
    assert.equal(inspected.mediaType, 'application/vnd.docker.distribution.manifest.v2+json');
    assert.equal(inspected.layers.length, 1);
  });

  it('pushes and pulls a two-layer image made with docker commit', async () => {
    const host = hostOf(open);
    const ref = `${host}/lib/two:1`;
    const name = `berth-clients-commit-${process.pid}`;
    await dockerd.dockerOk([
      'run',
      '--name',
      name,
      '--network',
      'none',
      SEED,
      'sh',
      '-c',
      'mkdir -p /data && echo second-layer > /data/marker && head -c 300000 /dev/urandom > /data/noise',
    ]);
    await dockerd.dockerOk(['commit', '--change', 'CMD ["cat", "/data/marker"]', name, ref]);
    await dockerd.dockerOk(['rm', name]);
    const pushed = await dockerd.dockerOk(['push', ref]);
    const digest = pushedDigest(pushed);
    // The busybox layer is already in lib/busybox: mounted; the new one is uploaded.
    assert.match(pushed, /Mounted from (lib|other)\/busybox/);
    assert.match(pushed, /Pushed/);
    const manifest = (
      await http('GET', `${open.url}/v2/lib/two/manifests/${digest}`, {
        headers: { Accept: ALL_MANIFEST_TYPES },
      })
    ).json() as { layers: Array<{ digest: string; size: number }> };
    assert.equal(manifest.layers.length, 2);
    for (const layer of manifest.layers) {
      const head = await http('HEAD', `${open.url}/v2/lib/two/blobs/${layer.digest}`);
      assert.equal(head.status, 200);
      assert.equal(Number(head.headers.get('content-length')), layer.size);
    }
    await dockerd.dockerOk(['rmi', ref]);
    await dockerd.dockerOk(['pull', ref]);
    const out = await dockerd.dockerOk(['run', '--rm', '--network', 'none', ref]);
    assert.equal(out, 'second-layer');
    const size = await dockerd.dockerOk([
      'run',
      '--rm',
      '--network',
      'none',
      ref,
      'sh',
      '-c',
      'wc -c < /data/noise',
    ]);
    assert.equal(size.trim(), '300000');
    await dockerd.dockerOk(['rmi', ref]);
  });

  it('push --all-tags, a manifest list made with docker manifest, pull --all-tags', async () => {
    const host = hostOf(open);
    const repo = `${host}/lib/all`;
    for (const t of ['a', 'b', 'c']) await dockerd.dockerOk(['tag', SEED, `${repo}:${t}`]);
    const pushed = await dockerd.dockerOk(['push', '--all-tags', repo]);
    const digest = pushedDigest(pushed);
    assert.equal(pushed.match(/digest: sha256:/g)?.length, 3);
    const tags = await http('GET', `${open.url}/v2/lib/all/tags/list`);
    assert.deepEqual(tags.json(), { name: 'lib/all', tags: ['a', 'b', 'c'] });

    // `docker manifest create/push` (the CLI talks to the registry itself): a manifest list in
    // another repository; the CLI mounts the child's blobs and puts the child manifest there.
    const list = `${host}/lib/list:1`;
    await dockerd.dockerOk(['manifest', 'create', '--insecure', list, `${repo}:a`]);
    const listPush = await dockerd.dockerOk(['manifest', 'push', '--insecure', '--purge', list]);
    const listDigest = /(sha256:[0-9a-f]{64})\s*$/.exec(listPush)?.[1] ?? '';
    assert.match(listDigest, /^sha256:[0-9a-f]{64}$/, listPush);
    const fetched = await http('GET', `${open.url}/v2/lib/list/manifests/1`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(
      fetched.headers.get('content-type'),
      'application/vnd.docker.distribution.manifest.list.v2+json',
    );
    assert.equal(fetched.headers.get('docker-content-digest'), listDigest);
    const child = await http('HEAD', `${open.url}/v2/lib/list/manifests/${digest}`, {
      headers: { Accept: ALL_MANIFEST_TYPES },
    });
    assert.equal(child.status, 200);
    // Both CLIs (Debian's 20.10 and the one first on PATH) read the list back.
    for (const cli of [dockerd.cli, 'docker']) {
      const inspected = JSON.parse(
        await dockerd.dockerOk(['manifest', 'inspect', '--insecure', list], { cli }),
      ) as {
        mediaType: string;
        manifests: Array<{ digest: string }>;
      };
      assert.equal(inspected.mediaType, 'application/vnd.docker.distribution.manifest.list.v2+json', cli);
      assert.equal(inspected.manifests[0]?.digest, digest);
    }

    for (const t of ['a', 'b', 'c']) await dockerd.dockerOk(['rmi', `${repo}:${t}`]);
    const pulledList = await dockerd.dockerOk(['pull', list]);
    assert.match(pulledList, new RegExp(`Digest: ${listDigest}`));
    assert.equal(
      await dockerd.dockerOk(['run', '--rm', '--network', 'none', list, 'echo', 'list-ok']),
      'list-ok',
    );
    const all = await dockerd.dockerOk(['pull', '--all-tags', repo]);
    for (const t of ['a', 'b', 'c']) assert.match(all, new RegExp(`${t}: Pulling from lib/all`));
    await dockerd.dockerOk(['rmi', list, `${repo}:a`, `${repo}:b`, `${repo}:c`]);
  });

  it('pulls and runs an OCI index (two platforms) that skopeo pushed', async () => {
    requireTool('skopeo', 'skopeo is needed for this test (scripts/install-deps.sh)');
    const host = hostOf(open);
    const layout = join(work, 'oci-index');
    const built = await buildOciLayout(layout, {
      refName: 'v1',
      marker: 'from-an-oci-index',
      platforms: [
        { os: 'linux', architecture: 'amd64' },
        { os: 'linux', architecture: 'arm64' },
      ],
    });
    await skopeo([
      'copy',
      '--all',
      '--dest-tls-verify=false',
      `oci:${layout}:v1`,
      `docker://${host}/oci/index:v1`,
    ]);
    const ref = `${host}/oci/index:v1`;
    const pulled = await dockerd.dockerOk(['pull', ref]);
    assert.match(pulled, new RegExp(`Digest: ${built.top}`));
    const out = await dockerd.dockerOk([
      'run',
      '--rm',
      '--network',
      'none',
      ref,
      '/bin/busybox',
      'cat',
      '/etc/marker',
    ]);
    assert.equal(out, 'from-an-oci-index amd64');
    await dockerd.dockerOk(['rmi', ref]);
  });
});

describe('docker with htpasswd basic auth', () => {
  it('login, push, pull; an unauthenticated pull is refused', async () => {
    const host = hostOf(basic);
    const ref = `${host}/private/busybox:1`;
    const unauth = await http('GET', `${basic.url}/v2/`);
    assert.equal(unauth.status, 401);
    assert.match(unauth.headers.get('www-authenticate') ?? '', /^Basic realm="berth-test"/);

    const config = await mkdtemp(join(work, 'docker-config-basic-'));
    const env = { DOCKER_CONFIG: config };
    const bad = await dockerd.docker(['login', host, '-u', 'alice', '-p', 'wrong'], { env });
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /unauthorized|401/i);
    const login = await dockerd.dockerOk(['login', host, '-u', 'alice', '-p', 'alice-pw'], { env });
    assert.match(login, /Login Succeeded/);

    await dockerd.dockerOk(['tag', SEED, ref]);
    const pushed = await dockerd.dockerOk(['push', ref], { env });
    const digest = pushedDigest(pushed);
    await dockerd.dockerOk(['rmi', ref]);
    const pulled = await dockerd.dockerOk(['pull', ref], { env });
    assert.match(pulled, new RegExp(`Digest: ${digest}`));
    await dockerd.dockerOk(['rmi', ref]);

    // No credentials (another, empty DOCKER_CONFIG): refused.
    const anon = await mkdtemp(join(work, 'docker-config-anon-'));
    const refused = await dockerd.docker(['pull', ref], { env: { DOCKER_CONFIG: anon } });
    assert.notEqual(refused.code, 0, refused.stdout);
    assert.match(refused.stderr, /no basic auth credentials|unauthorized/i);
    // After logout too.
    await dockerd.dockerOk(['logout', host], { env });
    const afterLogout = await dockerd.docker(['pull', ref], { env });
    assert.notEqual(afterLogout.code, 0, afterLogout.stdout);
  });
});

describe('docker with the built-in token server (Bearer)', () => {
  it('login, push, pull through tokens; anonymous pulls are refused', async () => {
    const host = hostOf(token);
    const ref = `${host}/alice/busybox:1`;
    const unauth = await http('GET', `${token.url}/v2/`);
    assert.equal(unauth.status, 401);
    assert.match(
      unauth.headers.get('www-authenticate') ?? '',
      /^Bearer realm="http:\/\/127\.0\.0\.1:\d+\/auth\/token"/,
    );

    const config = await mkdtemp(join(work, 'docker-config-token-'));
    const env = { DOCKER_CONFIG: config };
    const bad = await dockerd.docker(['login', host, '-u', 'alice', '-p', 'wrong'], { env });
    assert.notEqual(bad.code, 0);
    const login = await dockerd.dockerOk(['login', host, '-u', 'alice', '-p', 'alice-pw'], { env });
    assert.match(login, /Login Succeeded/);
    // docker login asks for an offline token: the CLI keeps the refresh token (no password), and
    // push/pull below go through the OAuth2 refresh_token grant of the token server.
    const saved = JSON.parse(await readFile(join(config, 'config.json'), 'utf8')) as {
      auths: Record<string, { auth?: string; identitytoken?: string }>;
    };
    assert.match(saved.auths[host]?.identitytoken ?? '', /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.equal(Buffer.from(saved.auths[host]?.auth ?? '', 'base64').toString(), 'alice:');

    await dockerd.dockerOk(['tag', SEED, ref]);
    const digest = pushedDigest(await dockerd.dockerOk(['push', ref], { env }));
    await dockerd.dockerOk(['rmi', ref]);
    const pulled = await dockerd.dockerOk(['pull', ref], { env });
    assert.match(pulled, new RegExp(`Digest: ${digest}`));
    const out = await dockerd.dockerOk(['run', '--rm', '--network', 'none', ref, 'echo', 'token-ok']);
    assert.equal(out, 'token-ok');
    await dockerd.dockerOk(['rmi', ref]);

    const anon = await mkdtemp(join(work, 'docker-config-anon-token-'));
    const refused = await dockerd.docker(['pull', ref], { env: { DOCKER_CONFIG: anon } });
    assert.notEqual(refused.code, 0, refused.stdout);
    assert.match(refused.stderr, /denied|unauthorized/i);
  });
});

describe("containerd's ctr (containerd 1.6) against berth", () => {
  it('pulls into a fresh namespace, pushes to a new repository, the manifest is there by digest', async () => {
    const host = hostOf(open);
    // dockerd 20.10 keeps its images itself: the moby namespace answers, empty of images.
    await dockerd.ctrOk(['-n', 'moby', 'images', 'ls']);
    const ns = ['-n', `berth-clients-${process.pid}`];
    await dockerd.ctrOk([...ns, 'images', 'pull', '--plain-http', `${host}/lib/busybox:1`], {
      timeoutMs: 60_000,
    });
    const listed = await dockerd.ctrOk([...ns, 'images', 'ls']);
    assert.match(listed, new RegExp(`${host.replace(/\./g, '\\.')}/lib/busybox:1`));

    // Same content, another repository: containerd mounts the blobs from lib/busybox.
    await dockerd.ctrOk([...ns, 'images', 'tag', `${host}/lib/busybox:1`, `${host}/ctr/mounted:v1`]);
    await dockerd.ctrOk([...ns, 'images', 'push', '--plain-http', `${host}/ctr/mounted:v1`]);

    // An image that is not in the registry yet (docker save → ctr import, converted to OCI):
    // containerd uploads every blob itself.
    const archive = join(work, 'seed.tar');
    await dockerd.dockerOk(['save', '-o', archive, SEED]);
    await dockerd.ctrOk([...ns, 'images', 'import', archive]);
    const imported = `docker.io/${SEED}`;
    await dockerd.ctrOk([...ns, 'images', 'convert', '--oci', imported, `${host}/ctr/uploaded:oci`]);
    await dockerd.ctrOk([...ns, 'images', 'push', '--plain-http', `${host}/ctr/uploaded:oci`]);

    for (const [repo, tag] of [
      ['ctr/mounted', 'v1'],
      ['ctr/uploaded', 'oci'],
    ] as const) {
      const byTag = await http('GET', `${open.url}/v2/${repo}/manifests/${tag}`, {
        headers: { Accept: ALL_MANIFEST_TYPES },
      });
      assert.equal(byTag.status, 200, `${repo}:${tag}`);
      const d = byTag.headers.get('docker-content-digest') ?? '';
      const byDigest = await http('GET', `${open.url}/v2/${repo}/manifests/${d}`, {
        headers: { Accept: ALL_MANIFEST_TYPES },
      });
      assert.equal(byDigest.status, 200);
      assert.deepEqual(byDigest.body, byTag.body);
      const m = byDigest.json() as { mediaType?: string; layers: Array<{ digest: string }> };
      if (repo === 'ctr/uploaded') assert.equal(m.mediaType, 'application/vnd.oci.image.manifest.v1+json');
      for (const l of m.layers) {
        assert.equal((await http('HEAD', `${open.url}/v2/${repo}/blobs/${l.digest}`)).status, 200);
      }
    }

    // And docker pulls and runs what containerd pushed (OCI media types).
    const ref = `${host}/ctr/uploaded:oci`;
    await dockerd.dockerOk(['pull', ref]);
    assert.equal(
      await dockerd.dockerOk(['run', '--rm', '--network', 'none', ref, 'echo', 'oci-ok']),
      'oci-ok',
    );
    await dockerd.dockerOk(['rmi', ref]);
    await dockerd.ctrOk([
      ...ns,
      'images',
      'rm',
      `${host}/lib/busybox:1`,
      `${host}/ctr/mounted:v1`,
      imported,
      ref,
    ]);
  });

  it('pushes and pulls with --user through basic auth and through the token server', async () => {
    const ns = ['-n', `berth-clients-auth-${process.pid}`];
    const fresh = ['-n', `berth-clients-auth2-${process.pid}`];
    const source = `${hostOf(open)}/lib/busybox:1`;
    await dockerd.ctrOk([...ns, 'images', 'pull', '--plain-http', source]);
    for (const [reg, repo] of [
      [basic, 'ctr/basic'],
      [token, 'alice/ctr'],
    ] as const) {
      const ref = `${hostOf(reg)}/${repo}:1`;
      await dockerd.ctrOk([...ns, 'images', 'tag', source, ref]);
      const anonPush = await dockerd.ctr([...ns, 'images', 'push', '--plain-http', ref]);
      assert.notEqual(anonPush.code, 0, `anonymous push to ${ref} succeeded`);
      await dockerd.ctrOk([...ns, 'images', 'push', '--plain-http', '--user', 'alice:alice-pw', ref]);
      const anonPull = await dockerd.ctr([...fresh, 'images', 'pull', '--plain-http', ref]);
      assert.notEqual(anonPull.code, 0, `anonymous pull of ${ref} succeeded`);
      assert.match(anonPull.stderr, /401 Unauthorized|403 Forbidden/);
      await dockerd.ctrOk([...fresh, 'images', 'pull', '--plain-http', '--user', 'alice:alice-pw', ref]);
      await dockerd.ctrOk([...fresh, 'images', 'rm', ref]);
      await dockerd.ctrOk([...ns, 'images', 'rm', ref]);
    }
    await dockerd.ctrOk([...ns, 'images', 'rm', source]);
  });
});
