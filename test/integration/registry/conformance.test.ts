// The behaviours of the OCI distribution conformance suite (v1.1.1) this registry once failed or
// that need a switch: the same requests, the same expected answers (the suite itself is a Go
// program and is not run here).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureSigningKeyPair } from '../../../src/registry/auth/keys.js';
import {
  errorCodes,
  http,
  OCI_INDEX,
  OCI_MANIFEST,
  pushBlob,
  pushImage,
  pushManifest,
  requireTool,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';

const DUMMY_DIGEST = sha256('dummy, nowhere in the registry');

describe('manifest GET/HEAD with a reference that is neither a tag nor a digest', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startTestRegistry();
    await pushImage(reg.url, 'conf/pull', 'v1');
  });
  after(async () => reg.stop());

  it('is 404 MANIFEST_UNKNOWN (the suite asks for .INVALID_MANIFEST_NAME)', async () => {
    for (const ref of [
      '.INVALID_MANIFEST_NAME',
      '-dash',
      'a'.repeat(129),
      'bad!tag',
      'sha256:bad',
      'md5:abc',
    ]) {
      const url = `${reg.url}/v2/conf/pull/manifests/${encodeURIComponent(ref)}`;
      const get = await http('GET', url, { headers: { Accept: OCI_MANIFEST } });
      assert.equal(get.status, 404, ref);
      assert.deepEqual(errorCodes(get), ['MANIFEST_UNKNOWN'], ref);
      const head = await http('HEAD', url, { headers: { Accept: OCI_MANIFEST } });
      assert.equal(head.status, 404, ref);
    }
  });

  it('a PUT with an invalid tag is still 400 TAG_INVALID', async () => {
    const res = await pushManifest(reg.url, 'conf/pull', '.INVALID_MANIFEST_NAME', '{}', OCI_MANIFEST);
    assert.equal(res.status, 400);
    assert.deepEqual(errorCodes(res), ['TAG_INVALID']);
  });
});

/** The suite's "Cross-Repository Blob Mount" context, as it runs it. */
async function crossMountSequence(reg: TestRegistry, automatic: boolean): Promise<void> {
  const blobA = `test blob A ${automatic}`;
  const digest = await pushBlob(reg.url, 'conf/default', blobA);
  // Without from, a digest nowhere: an upload session.
  const noFrom = await http('POST', `${reg.url}/v2/conf/crossmount/blobs/uploads/?mount=${DUMMY_DIGEST}`);
  assert.equal(noFrom.status, 202);
  assert.ok(noFrom.headers.get('location'));
  // From the default namespace: 201 (202 is allowed, berth mounts).
  const mounted = await http(
    'POST',
    `${reg.url}/v2/conf/crossmount/blobs/uploads/?mount=${digest}&from=conf/default`,
  );
  assert.equal(mounted.status, 201);
  const location = new URL(mounted.headers.get('location') ?? '', reg.url);
  assert.equal(location.pathname, `/v2/conf/crossmount/blobs/${digest}`);
  const get = await http('GET', location.toString());
  assert.equal(get.status, 200);
  assert.equal(get.text(), blobA);
  // Without from, of a blob the registry has: 201 with automatic content discovery, else 202.
  const again = await http('POST', `${reg.url}/v2/conf/crossmount/blobs/uploads/?mount=${digest}`);
  assert.equal(again.status, automatic ? 201 : 202);
}

describe('mount without from (OCI_AUTOMATIC_CROSSMOUNT)', () => {
  let on: TestRegistry;
  let off: TestRegistry;
  before(async () => {
    on = await startTestRegistry();
    off = await startTestRegistry({ berth: { crossmount: { automatic: false } } });
  });
  after(async () => {
    await on.stop();
    await off.stop();
  });

  it('OCI_AUTOMATIC_CROSSMOUNT=true: the suite sequence, the last mount 201', async () => {
    await crossMountSequence(on, true);
  });

  it('OCI_AUTOMATIC_CROSSMOUNT=false (berth.crossmount.automatic: false): the last mount 202', async () => {
    await crossMountSequence(off, false);
  });

  it('finds the blob in any other repository and links it into the target', async () => {
    const digest = await pushBlob(on.url, 'conf/elsewhere/src', 'only in another repository');
    const res = await http('POST', `${on.url}/v2/conf/target/blobs/uploads/?mount=${digest}`);
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('docker-content-digest'), digest);
    assert.equal(new URL(res.headers.get('location') ?? '').pathname, `/v2/conf/target/blobs/${digest}`);
    assert.equal(
      (await http('GET', `${on.url}/v2/conf/target/blobs/${digest}`)).text(),
      'only in another repository',
    );
    // Switched off, the same request starts an upload and links nothing.
    const digestOff = await pushBlob(off.url, 'conf/elsewhere/src', 'only in another repository');
    const resOff = await http('POST', `${off.url}/v2/conf/target/blobs/uploads/?mount=${digestOff}`);
    assert.equal(resOff.status, 202);
    assert.equal((await http('HEAD', `${off.url}/v2/conf/target/blobs/${digestOff}`)).status, 404);
  });

  it('an invalid mount digest starts an upload', async () => {
    const res = await http('POST', `${on.url}/v2/conf/target/blobs/uploads/?mount=sha256:nope`);
    assert.equal(res.status, 202);
    assert.ok(res.headers.get('docker-upload-uuid'));
  });
});

describe('mount without from under token auth', () => {
  let dir: string;
  let reg: TestRegistry;
  const basic = (u: string) => ({ Authorization: `Basic ${Buffer.from(`${u}:${u}-pw`).toString('base64')}` });
  async function token(user: string, scopes: string[]): Promise<Record<string, string>> {
    const q = new URLSearchParams({ service: 'conf' });
    for (const s of scopes) q.append('scope', s);
    const res = await http('GET', `${reg.url}/auth/token?${q}`, { headers: basic(user) });
    assert.equal(res.status, 200, res.text());
    return { Authorization: `Bearer ${(res.json() as { token: string }).token}` };
  }
  async function push(user: string, name: string, data: string): Promise<string> {
    const auth = await token(user, [`repository:${name}:pull,push`]);
    const digest = sha256(data);
    const res = await http('POST', `${reg.url}/v2/${name}/blobs/uploads/?digest=${digest}`, {
      headers: { ...auth, 'Content-Type': 'application/octet-stream' },
      body: data,
    });
    assert.equal(res.status, 201, res.text());
    return digest;
  }

  before(async () => {
    requireTool('htpasswd', 'apt-get install apache2-utils');
    dir = mkdtempSync(join(tmpdir(), 'berth-conf-'));
    const users = join(dir, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
    execFileSync('htpasswd', ['-bB', '-C', '4', users, 'admin', 'admin-pw'], { stdio: 'ignore' });
    const keys = await ensureSigningKeyPair(join(dir, 'keys'));
    reg = await startTestRegistry({
      auth: { htpasswd: { realm: 'conf', path: users } },
      berth: {
        tokenserver: {
          path: '/auth/token',
          key: keys.keyPath,
          certificate: keys.certPath,
          service: 'conf',
          issuer: 'conf-issuer',
          acl: [
            { account: 'alice', name: 'alice/*', actions: ['pull', 'push'] },
            { account: 'admin', name: '*', actions: ['pull', 'push'] },
          ],
        },
      },
    });
  });
  after(async () => {
    await reg.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('mounts only from repositories the token lets the caller pull', async () => {
    const mine = await push('alice', 'alice/src', 'alice may read this');
    const secret = await push('admin', 'secret/store', 'alice may not read this');
    // alice asks for secret/store too: the token server grants her nothing there.
    const auth = await token('alice', [
      'repository:alice/dst:pull,push',
      'repository:alice/src:pull',
      'repository:secret/store:pull',
    ]);
    const ok = await http('POST', `${reg.url}/v2/alice/dst/blobs/uploads/?mount=${mine}`, { headers: auth });
    assert.equal(ok.status, 201, ok.text());
    const refused = await http('POST', `${reg.url}/v2/alice/dst/blobs/uploads/?mount=${secret}`, {
      headers: auth,
    });
    assert.equal(refused.status, 202, refused.text());
    assert.equal(
      (await http('HEAD', `${reg.url}/v2/alice/dst/blobs/${secret}`, { headers: auth })).status,
      404,
    );
    // A token for the target alone does not search alice/src either.
    const narrow = await token('alice', ['repository:alice/other:pull,push']);
    const res = await http('POST', `${reg.url}/v2/alice/other/blobs/uploads/?mount=${mine}`, {
      headers: narrow,
    });
    assert.equal(res.status, 202);
  });
});

describe('referrers pagination (berth.pagination.referrers)', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startTestRegistry({ berth: { pagination: { referrers: 2 } } });
  });
  after(async () => reg.stop());

  it('pages the index with a Link header until every referrer was listed', async () => {
    const subject = await pushImage(reg.url, 'conf/refs', 'v1');
    const empty = await pushBlob(reg.url, 'conf/refs', '{}');
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const type = i % 2 === 0 ? 'application/vnd.example.even' : 'application/vnd.example.odd';
      const body = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        artifactType: type,
        config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: empty, size: 2 },
        layers: [{ mediaType: 'application/vnd.oci.empty.v1+json', digest: empty, size: 2 }],
        subject: { mediaType: OCI_MANIFEST, digest: subject.digest, size: subject.body.length },
        annotations: { n: String(i) },
      });
      const res = await pushManifest(reg.url, 'conf/refs', sha256(body), body, OCI_MANIFEST);
      assert.equal(res.status, 201, res.text());
      made.push(sha256(body));
    }
    const walk = async (first: string): Promise<{ digests: string[]; pages: number }> => {
      const digests: string[] = [];
      let next: string | undefined = first;
      let pages = 0;
      while (next !== undefined && pages < 10) {
        const res = await http('GET', new URL(next, reg.url).toString());
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), OCI_INDEX);
        const doc = res.json() as { manifests: Array<{ digest: string }> };
        assert.ok(doc.manifests.length <= 2);
        digests.push(...doc.manifests.map((m) => m.digest));
        pages++;
        const link = res.headers.get('link');
        next = link ? /^<([^>]+)>; rel="next"$/.exec(link)?.[1] : undefined;
        if (link) assert.ok(next, link);
      }
      return { digests, pages };
    };
    const all = await walk(`/v2/conf/refs/referrers/${subject.digest}`);
    assert.equal(all.pages, 3);
    assert.deepEqual(all.digests, [...made].sort());
    // The artifactType filter holds on every page.
    const even = await walk(
      `/v2/conf/refs/referrers/${subject.digest}?artifactType=application/vnd.example.even`,
    );
    assert.equal(even.pages, 2);
    assert.deepEqual(even.digests, [made[0], made[2], made[4]].sort());
  });
});
