import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import { isKind } from '../../../../src/common/errors.js';
import {
  decodeAuthHeader,
  EndpointResolver,
  parseChallenges,
  RegistryClient,
  type RepositorySession,
} from '../../../../src/engine/distribution/index.js';
import { startRegistry } from '../../../../src/registry/index.js';
import {
  DOCKER_MANIFEST,
  pushImage,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../../helpers/registry.js';

type Running = Awaited<ReturnType<typeof startRegistry>>;

async function start(extra: Record<string, unknown>): Promise<Running> {
  const root = await mkdtemp(join(tmpdir(), 'berth-dist-reg-'));
  return startRegistry({
    version: '0.1',
    log: { level: 'error', accesslog: { disabled: true } },
    storage: { filesystem: { rootdirectory: root }, delete: { enabled: true } },
    http: { addr: '127.0.0.1:0' },
    ...extra,
  });
}

function hostOf(url: string): string {
  return new URL(url).host;
}

async function collect(it: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of it) out.push(c);
  return Buffer.concat(out);
}

/**
 * A blob read with blobTo into a sink that copies what it gets, now and then saying it is full
 * (room comes a moment later), as the unpacking thread's ring does.
 */
async function collectTo(
  repo: RepositorySession,
  digest: string,
  size: number,
  o: { onResume?: (attempt: number, offset: number) => void; giveUpAfter?: number } = {},
): Promise<Buffer> {
  const out: Buffer[] = [];
  let n = 0;
  let writes = 0;
  await repo.blobTo(
    digest,
    size,
    {
      write: (chunk) => {
        out.push(Buffer.from(chunk));
        n += chunk.length;
        return o.giveUpAfter === undefined && ++writes % 3 !== 0;
      },
      room: async () => {
        await new Promise((r) => setTimeout(r, 2));
        if (o.giveUpAfter !== undefined && n >= o.giveUpAfter) throw new Error('the sink gave up');
      },
    },
    { onResume: o.onResume },
  );
  return Buffer.concat(out);
}

describe('registry client', () => {
  let work: string;
  let open: TestRegistry;
  let basic: Running;
  let token: Running;
  const client = new RegistryClient({ insecureRegistries: [], mirrors: [] });

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'berth-dist-client-'));
    const users = join(work, 'htpasswd');
    await writeFile(users, `alice:${bcrypt.hashSync('alice-pw', 5)}\n`);
    open = await startTestRegistry();
    basic = await start({ auth: { htpasswd: { realm: 'test', path: users } } });
    token = await start({ berth: { tokenserver: { enabled: true, htpasswd: users } } });
  });

  after(async () => {
    client.close();
    await open?.stop();
    await basic?.close();
    await token?.close();
    await rm(work, { recursive: true, force: true });
  });

  it('fetches a manifest by tag and by digest, and a blob verified', async () => {
    const pushed = await pushImage(open.url, 'team/app', 'v1', { layer: 'layer bytes' });
    const host = hostOf(open.url);
    const eps = await client.endpoints(host, `${host}/team/app`);
    assert.equal(eps.at(-1)?.base, `http://${host}`);
    const repo = await client.open(eps, 'team/app', {}, ['pull']);
    assert.equal(repo.endpoint.base, `http://${host}`, 'https fails on a plain registry, http is next');
    const byTag = await repo.manifest('v1');
    assert.equal(byTag.digest, pushed.digest);
    assert.equal(byTag.kind, 'manifest');
    const byDigest = await repo.manifest(pushed.digest);
    assert.equal(byDigest.digest, pushed.digest);
    const blob = await collect(repo.blob(pushed.layer, 11));
    assert.equal(blob.toString(), 'layer bytes');
    assert.deepEqual(await repo.tags(), ['v1']);
    await assert.rejects(repo.manifest('nope'), (e) => isKind(e, 'NotFound'));
  });

  it('authenticates with basic credentials, and refuses without', async () => {
    const host = hostOf(basic.url);
    const eps = await client.endpoints(host, host);
    const anon = await client.open(eps, 'a/b', {}, ['pull']);
    await assert.rejects(anon.manifest('x'), (e) => isKind(e, 'Unauthorized'));
    const alice = await client.open(eps, 'a/b', { username: 'alice', password: 'alice-pw' }, ['pull']);
    await assert.rejects(alice.manifest('x'), (e) => isKind(e, 'NotFound'));
  });

  it('gets bearer tokens from the token server', async () => {
    const host = hostOf(token.url);
    const eps = await client.endpoints(host, host);
    const anon = await client.open(eps, 'a/b', {}, ['pull']);
    await assert.rejects(anon.manifest('x'), (e) => isKind(e, 'Unauthorized') || isKind(e, 'Forbidden'));
    const bad = await client.open(eps, 'a/b', { username: 'alice', password: 'wrong' }, ['pull']);
    await assert.rejects(bad.manifest('x'), (e) => isKind(e, 'Unauthorized'));
    const alice = await client.open(eps, 'a/b', { username: 'alice', password: 'alice-pw' }, ['pull']);
    await assert.rejects(alice.manifest('x'), (e) => isKind(e, 'NotFound'));
  });

  it('uses an identity token as an OAuth2 refresh token, and a registry token as it is', async () => {
    const host = hostOf(token.url);
    const eps = await client.endpoints(host, host);
    const ping = await fetch(`${token.url}/v2/`);
    const challenge = parseChallenges(ping.headers.get('www-authenticate') ?? '')[0];
    assert.equal(challenge?.scheme, 'bearer');
    const realm = challenge?.params.realm as string;
    const form = new URLSearchParams({
      grant_type: 'password',
      username: 'alice',
      password: 'alice-pw',
      service: challenge?.params.service ?? '',
      client_id: 'test',
      access_type: 'offline',
      scope: 'repository:a/b:pull',
    });
    const login = await fetch(realm, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    const answer = (await login.json()) as { refresh_token?: string; access_token?: string };
    assert.ok(answer.refresh_token, JSON.stringify(answer));
    const viaRefresh = await client.open(eps, 'a/b', { identitytoken: answer.refresh_token }, ['pull']);
    await assert.rejects(viaRefresh.manifest('x'), (e) => isKind(e, 'NotFound'));
    const viaToken = await client.open(eps, 'a/b', { registrytoken: answer.access_token }, ['pull']);
    await assert.rejects(viaToken.manifest('x'), (e) => isKind(e, 'NotFound'));
  });

  it('resumes a dropped blob download with Range and rejects corrupt bytes', async () => {
    const data = Buffer.alloc(300_000, 7);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 255;
    const pushed = await pushImage(open.url, 'drop/me', 'v1', { layer: data, mediaType: DOCKER_MANIFEST });
    const upstream = new URL(open.url);
    let drops = 0;
    const ranges: string[] = [];
    let corrupt = false;
    const proxy: Server = createServer((req, res) => {
      const up = httpRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
        },
        (ur) => {
          if (req.url?.includes('/blobs/')) {
            if (req.headers.range) ranges.push(String(req.headers.range));
            res.writeHead(ur.statusCode ?? 500, ur.headers);
            let sent = 0;
            ur.on('data', (c: Buffer) => {
              if (corrupt) c = Buffer.from(c).fill(1);
              sent += c.length;
              res.write(c);
              if (drops === 0 && sent > 100_000) {
                drops++;
                res.socket?.destroy();
                ur.destroy();
              }
            });
            ur.on('end', () => res.end());
            return;
          }
          res.writeHead(ur.statusCode ?? 500, ur.headers);
          ur.pipe(res);
        },
      );
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const repo = await client.open(await client.endpoints(host, host), 'drop/me', {}, ['pull']);
      const resumes: number[] = [];
      const got = await collect(
        repo.blob(pushed.layer, data.length, { onResume: (_a, off) => resumes.push(off) }),
      );
      assert.equal(sha256(got), pushed.layer);
      assert.equal(resumes.length, 1);
      assert.match(ranges[0] ?? '', /^bytes=\d+-$/);
      // the same pushed into a sink, read off the socket: the drop resumed there too
      drops = 0;
      ranges.length = 0;
      resumes.length = 0;
      const pushedTo = await collectTo(repo, pushed.layer, data.length, {
        onResume: (_a, off) => resumes.push(off),
      });
      assert.equal(sha256(pushedTo), pushed.layer);
      assert.equal(resumes.length, 1);
      assert.match(ranges[0] ?? '', /^bytes=\d+-$/);
      // a sink that gives up: the blob is read on for its digest, then the sink's error
      await assert.rejects(
        collectTo(repo, pushed.layer, data.length, { giveUpAfter: 1 }),
        /the sink gave up/,
      );
      corrupt = true;
      await assert.rejects(
        collect(repo.blob(pushed.layer, data.length)),
        /filesystem layer verification failed/,
      );
      // corrupt bytes are reported as such, before a sink's giving up
      for (const giveUpAfter of [undefined, 1]) {
        await assert.rejects(
          collectTo(repo, pushed.layer, data.length, { giveUpAfter }),
          /filesystem layer verification failed/,
        );
      }
    } finally {
      proxy.close();
    }
  });
});

describe('registry client redirects', () => {
  it('follows a blob redirect to another host without the Authorization header', async () => {
    const data = Buffer.from('redirected blob');
    const digest = sha256(data);
    const seen: Array<string | undefined> = [];
    const storage = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.end(data);
    });
    await new Promise<void>((r) => storage.listen(0, '127.0.0.1', r));
    const storagePort = (storage.address() as AddressInfo).port;
    const registry = createServer((req, res) => {
      if (!req.headers.authorization) {
        res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="r"' });
        res.end();
        return;
      }
      if (req.url === '/v2/') {
        res.end('{}');
        return;
      }
      // a different port is a different host (as Go's client sees it)
      res.writeHead(307, { Location: `http://127.0.0.1:${storagePort}/blob` });
      res.end();
    });
    await new Promise<void>((r) => registry.listen(0, '127.0.0.1', r));
    const client = new RegistryClient({ insecureRegistries: [], mirrors: [] });
    try {
      const host = `127.0.0.1:${(registry.address() as AddressInfo).port}`;
      const repo = await client.open(
        await client.endpoints(host, host),
        'a/b',
        { username: 'u', password: 'p' },
        ['pull'],
      );
      const got = await collect(repo.blob(digest, data.length));
      assert.equal(got.toString(), 'redirected blob');
      assert.deepEqual(seen, [undefined]);
      // pushed into a sink: the raw read leaves the redirect to the ordinary client
      assert.equal((await collectTo(repo, digest, data.length)).toString(), 'redirected blob');
      assert.deepEqual(seen, [undefined, undefined]);
    } finally {
      client.close();
      registry.close();
      storage.close();
    }
  });
});

describe('registry client pieces', () => {
  it('parses WWW-Authenticate challenges', () => {
    assert.deepEqual(
      parseChallenges('Bearer realm="https://a/token",service="reg",scope="repository:x:pull"'),
      [
        {
          scheme: 'bearer',
          params: { realm: 'https://a/token', service: 'reg', scope: 'repository:x:pull' },
        },
      ],
    );
    assert.deepEqual(parseChallenges(['Basic realm="x"']), [{ scheme: 'basic', params: { realm: 'x' } }]);
  });

  it('decodes X-Registry-Auth (base64url JSON, auth field)', () => {
    const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    assert.deepEqual(decodeAuthHeader(enc({ username: 'u', password: 'p', serveraddress: 'h' })), {
      username: 'u',
      password: 'p',
      serveraddress: 'h',
    });
    const viaAuth = decodeAuthHeader(enc({ auth: Buffer.from('bob:s:e').toString('base64') }));
    assert.equal(viaAuth.username, 'bob');
    assert.equal(viaAuth.password, 's:e');
    assert.equal(decodeAuthHeader(enc({ identitytoken: 'tok' })).identitytoken, 'tok');
    assert.deepEqual(decodeAuthHeader('%%%'), {});
    assert.deepEqual(decodeAuthHeader(undefined), {});
  });

  it('maps docker.io names to mirrors, and says so when there is none', async () => {
    const none = new EndpointResolver({ insecureRegistries: [], mirrors: [], certsDirs: [] });
    await assert.rejects(
      none.endpoints('docker.io', 'busybox'),
      (e) => isKind(e, 'NotFound') && /mirror/.test(String(e)),
    );
    const two = new EndpointResolver({
      insecureRegistries: [],
      mirrors: ['http://127.0.0.1:5000/', 'https://mirror.example:443/prefix'],
      certsDirs: [],
    });
    const eps = await two.endpoints('docker.io', 'busybox');
    assert.deepEqual(
      eps.map((e) => [e.base, e.mirror, e.insecure]),
      [
        ['http://127.0.0.1:5000', true, true],
        ['https://mirror.example/prefix', true, false],
      ],
    );
  });

  it('treats loopback, listed hosts and CIDRs as insecure (https then http)', async () => {
    const r = new EndpointResolver({
      insecureRegistries: ['10.1.0.0/16', 'reg.example:5000'],
      mirrors: [],
      certsDirs: [],
    });
    assert.equal(await r.isInsecure('127.0.0.1:5000'), true);
    assert.equal(await r.isInsecure('localhost:5000'), true);
    assert.equal(await r.isInsecure('10.1.2.3:443'), true);
    assert.equal(await r.isInsecure('10.2.0.1'), false);
    assert.equal(await r.isInsecure('reg.example:5000'), true);
    const eps = await r.endpoints('10.1.2.3:5000', 'x');
    assert.deepEqual(
      eps.map((e) => e.base),
      ['https://10.1.2.3:5000', 'http://10.1.2.3:5000'],
    );
    assert.deepEqual(
      (await r.endpoints('10.9.9.9:5000', 'x')).map((e) => e.base),
      ['https://10.9.9.9:5000'],
    );
  });
});

describe('registry client, a blob read off the socket', () => {
  it('takes chunked answers and odd heads through the ordinary client, and reads Content-Length ones itself', async () => {
    const data = Buffer.alloc(700_000);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 255;
    const digest = sha256(data);
    let mode: 'length' | 'chunked' | 'gzip' = 'length';
    const agents: string[] = [];
    const registry = createServer((req, res) => {
      if (req.url === '/v2/') {
        res.end('{}');
        return;
      }
      agents.push(String(req.headers.connection));
      if (mode === 'chunked') {
        res.writeHead(200);
        res.write(data.subarray(0, 1000));
        res.end(data.subarray(1000));
        return;
      }
      if (mode === 'gzip') {
        // a content coding the reader does not undo: the ordinary client is asked (and sees
        // the same coded bytes), so the digest fails as it would there
        res.writeHead(200, { 'Content-Encoding': 'gzip', 'Content-Length': String(data.length) });
        res.end(data);
        return;
      }
      res.writeHead(200, { 'Content-Length': String(data.length) });
      res.end(data);
    });
    await new Promise<void>((r) => registry.listen(0, '127.0.0.1', r));
    const client = new RegistryClient({ insecureRegistries: [], mirrors: [] });
    try {
      const host = `127.0.0.1:${(registry.address() as AddressInfo).port}`;
      const repo = await client.open(await client.endpoints(host, host), 'a/b', {}, ['pull']);
      assert.ok((await collectTo(repo, digest, data.length)).equals(data));
      // the raw read asks for its own connection, closed after it
      assert.deepEqual(agents, ['close']);
      mode = 'chunked';
      assert.ok((await collectTo(repo, digest, data.length)).equals(data));
      assert.deepEqual(agents.slice(1), ['close', 'keep-alive'], 'the raw read, then the ordinary client');
      mode = 'gzip';
      assert.ok((await collectTo(repo, digest, data.length)).equals(data));
    } finally {
      client.close();
      registry.close();
    }
  });
});
