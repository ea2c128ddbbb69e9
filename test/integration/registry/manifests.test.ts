import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { signSchema1, verifySchema1 } from '../../../src/registry/manifests/schema1.js';
import {
  ALL_MANIFEST_TYPES,
  DOCKER_LIST,
  DOCKER_MANIFEST,
  errorCodes,
  http,
  OCI_INDEX,
  OCI_MANIFEST,
  pushBlob,
  pushImage,
  pushManifest,
  sha256,
  startTestRegistry,
  type TestRegistry,
} from '../../helpers/registry.js';

let reg: TestRegistry;
let base: string;

before(async () => {
  reg = await startTestRegistry();
  base = reg.url;
});
after(async () => {
  await reg.stop();
});

describe('manifest types', () => {
  it('Docker schema 2 round trip', async () => {
    const img = await pushImage(base, 'types/docker', 'v1', { mediaType: DOCKER_MANIFEST });
    const res = await http('GET', `${base}/v2/types/docker/manifests/v1`, {
      headers: { Accept: DOCKER_MANIFEST },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), DOCKER_MANIFEST);
    assert.equal(res.text(), img.body);
  });

  for (const [listType, childType] of [
    [OCI_INDEX, OCI_MANIFEST],
    [DOCKER_LIST, DOCKER_MANIFEST],
  ] as const) {
    it(`${listType} with children in the repository`, async () => {
      const repo = listType === OCI_INDEX ? 'types/oci-index' : 'types/docker-list';
      const amd = await pushImage(base, repo, 'amd64', { mediaType: childType });
      const arm = await pushImage(base, repo, 'arm64', { mediaType: childType });
      const index = JSON.stringify({
        schemaVersion: 2,
        mediaType: listType,
        manifests: [
          {
            mediaType: childType,
            digest: amd.digest,
            size: Buffer.byteLength(amd.body),
            platform: { os: 'linux', architecture: 'amd64' },
          },
          {
            mediaType: childType,
            digest: arm.digest,
            size: Buffer.byteLength(arm.body),
            platform: { os: 'linux', architecture: 'arm64' },
          },
        ],
      });
      const put = await pushManifest(base, repo, 'multi', index, listType);
      assert.equal(put.status, 201, put.text());
      assert.equal(put.headers.get('docker-content-digest'), sha256(index));
      const get = await http('GET', `${base}/v2/${repo}/manifests/multi`, { headers: { Accept: listType } });
      assert.equal(get.status, 200);
      assert.equal(get.headers.get('content-type'), listType);
      assert.equal(get.text(), index);
    });
  }

  it('an index with unknown children answers 400 MANIFEST_BLOB_UNKNOWN per missing child', async () => {
    const missing = sha256('not a manifest here');
    const index = {
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [{ mediaType: OCI_MANIFEST, digest: missing, size: 10 }],
    };
    const res = await pushManifest(base, 'types/badindex', 'v1', index, OCI_INDEX);
    assert.equal(res.status, 400);
    assert.deepEqual(errorCodes(res), ['MANIFEST_BLOB_UNKNOWN']);
  });

  it('the media type comes from the document when Content-Type is missing or generic', async () => {
    const img = await pushImage(base, 'types/sniff', 'v1');
    const res = await pushManifest(base, 'types/sniff', 'v2', img.body, 'application/json');
    assert.equal(res.status, 201);
    const get = await http('GET', `${base}/v2/types/sniff/manifests/v2`, {
      headers: { Accept: OCI_MANIFEST },
    });
    assert.equal(get.headers.get('content-type'), OCI_MANIFEST);
  });

  it('a mediaType field that contradicts Content-Type is MANIFEST_INVALID', async () => {
    const img = await pushImage(base, 'types/mismatch', 'v1');
    const res = await pushManifest(base, 'types/mismatch', 'v2', img.body, DOCKER_MANIFEST);
    assert.equal(res.status, 400);
    assert.deepEqual(errorCodes(res), ['MANIFEST_INVALID']);
  });

  it('tags that end like temporary files are listed', async () => {
    const img = await pushImage(base, 'types/tmpnames', 'v1.tmp');
    await pushManifest(base, 'types/tmpnames', 'x.abcdef012345.tm', img.body, OCI_MANIFEST);
    const tags = await http('GET', `${base}/v2/types/tmpnames/tags/list`);
    assert.deepEqual((tags.json() as { tags: string[] }).tags, ['v1.tmp', 'x.abcdef012345.tm']);
  });

  it('?tag= on PUT by digest tags the manifest (OCI 1.1)', async () => {
    const img = await pushImage(base, 'types/tagparam', 'first');
    const res = await http('PUT', `${base}/v2/types/tagparam/manifests/${img.digest}?tag=second&tag=third`, {
      body: img.body,
      headers: { 'Content-Type': OCI_MANIFEST },
    });
    assert.equal(res.status, 201);
    const tags = await http('GET', `${base}/v2/types/tagparam/tags/list`);
    assert.deepEqual((tags.json() as { tags: string[] }).tags, ['first', 'second', 'third']);
  });
});

describe('content negotiation (as the reference registry)', () => {
  let oci: { digest: string };
  let docker: { digest: string };
  before(async () => {
    oci = await pushImage(base, 'neg/repo', 'oci');
    docker = await pushImage(base, 'neg/repo', 'docker', { mediaType: DOCKER_MANIFEST });
  });
  it('an OCI manifest is 404 MANIFEST_UNKNOWN for clients that do not accept OCI, by tag or digest', async () => {
    for (const ref of ['oci', oci.digest]) {
      for (const accept of [undefined, '*/*', DOCKER_MANIFEST]) {
        const res = await http('GET', `${base}/v2/neg/repo/manifests/${ref}`, {
          headers: accept ? { Accept: accept } : {},
        });
        assert.equal(res.status, 404, `${ref} ${accept}`);
        assert.deepEqual(errorCodes(res), ['MANIFEST_UNKNOWN']);
      }
    }
  });
  it('a Docker schema 2 manifest by tag is 400 MANIFEST_INVALID without Accept (no schema 1 conversion)', async () => {
    const res = await http('GET', `${base}/v2/neg/repo/manifests/docker`);
    assert.equal(res.status, 400);
    assert.deepEqual(errorCodes(res), ['MANIFEST_INVALID']);
  });
  it('by digest a Docker schema 2 manifest is served whatever the Accept', async () => {
    const res = await http('GET', `${base}/v2/neg/repo/manifests/${docker.digest}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), DOCKER_MANIFEST);
  });
  it('Accept lists with parameters and several headers work', async () => {
    const res = await http('GET', `${base}/v2/neg/repo/manifests/oci`, {
      headers: { Accept: `${DOCKER_MANIFEST};q=0.9, ${OCI_MANIFEST};q=0.5` },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), OCI_MANIFEST);
  });
  it('ETag and If-None-Match on manifests', async () => {
    const res = await http('GET', `${base}/v2/neg/repo/manifests/oci`, {
      headers: { Accept: OCI_MANIFEST, 'If-None-Match': `"${oci.digest}"` },
    });
    assert.equal(res.status, 304);
  });
});

describe('signed schema 1', () => {
  const layer = 'schema1 layer';
  let layerDigest: string;
  before(async () => {
    layerDigest = await pushBlob(base, 'old/image', layer);
  });

  function payload(name: string, tag: string): string {
    return JSON.stringify(
      {
        schemaVersion: 1,
        name,
        tag,
        architecture: 'amd64',
        fsLayers: [{ blobSum: layerDigest }],
        history: [
          { v1Compatibility: JSON.stringify({ id: 'a'.repeat(64), created: '2020-01-01T00:00:00Z' }) },
        ],
      },
      null,
      3,
    );
  }

  for (const kind of ['ec', 'rsa'] as const) {
    it(`verifies ${kind === 'ec' ? 'ES256' : 'RS256'} signatures; the digest is the payload's`, async () => {
      const { privateKey } =
        kind === 'ec'
          ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
          : generateKeyPairSync('rsa', { modulusLength: 2048 });
      const tag = `v1-${kind}`;
      const p = payload('old/image', tag);
      const signed = signSchema1(p, privateKey);
      const res = await pushManifest(
        base,
        'old/image',
        tag,
        signed.toString(),
        'application/vnd.docker.distribution.manifest.v1+prettyjws',
      );
      assert.equal(res.status, 201, res.text());
      assert.equal(res.headers.get('docker-content-digest'), sha256(p));
      const get = await http('GET', `${base}/v2/old/image/manifests/${tag}`);
      assert.equal(get.status, 200);
      assert.equal(
        get.headers.get('content-type'),
        'application/vnd.docker.distribution.manifest.v1+prettyjws',
      );
      assert.equal(get.headers.get('docker-content-digest'), sha256(p));
      assert.deepEqual(get.body, signed);
      const byDigest = await http('GET', `${base}/v2/old/image/manifests/${sha256(p)}`);
      assert.equal(byDigest.status, 200);
    });
  }

  it('a tampered signature is 400 MANIFEST_UNVERIFIED; an unsigned one too', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const signed = signSchema1(payload('old/image', 'bad'), privateKey).toString();
    const tampered = signed.replace('"architecture": "amd64"', '"architecture": "arm64"');
    const res = await pushManifest(
      base,
      'old/image',
      'bad',
      tampered,
      'application/vnd.docker.distribution.manifest.v1+prettyjws',
    );
    assert.equal(res.status, 400);
    assert.deepEqual(errorCodes(res), ['MANIFEST_UNVERIFIED']);
    const unsigned = await pushManifest(
      base,
      'old/image',
      'bad',
      payload('old/image', 'bad'),
      'application/vnd.docker.distribution.manifest.v1+prettyjws',
    );
    assert.equal(unsigned.status, 400);
    assert.deepEqual(errorCodes(unsigned), ['MANIFEST_UNVERIFIED']);
  });

  it('name and tag must match the URL (NAME_INVALID, TAG_INVALID)', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const wrongName = signSchema1(payload('other/name', 'v1'), privateKey).toString();
    const r1 = await pushManifest(
      base,
      'old/image',
      'v1',
      wrongName,
      'application/vnd.docker.distribution.manifest.v1+prettyjws',
    );
    assert.equal(r1.status, 400);
    assert.deepEqual(errorCodes(r1), ['NAME_INVALID']);
    const wrongTag = signSchema1(payload('old/image', 'v9'), privateKey).toString();
    const r2 = await pushManifest(
      base,
      'old/image',
      'v1',
      wrongTag,
      'application/vnd.docker.distribution.manifest.v1+prettyjws',
    );
    assert.equal(r2.status, 400);
    assert.deepEqual(errorCodes(r2), ['TAG_INVALID']);
  });

  it('a schema-1 payload stored without signatures (as the reference stores it) is served signed', async () => {
    const p = payload('old/image', 'stored');
    const digest = sha256(p);
    const hex = digest.slice(7);
    const v2 = join(reg.root, 'docker/registry/v2');
    await mkdir(join(v2, 'blobs/sha256', hex.slice(0, 2), hex), { recursive: true });
    await writeFile(join(v2, 'blobs/sha256', hex.slice(0, 2), hex, 'data'), p);
    for (const dir of [`_manifests/revisions/sha256/${hex}`, '_manifests/tags/stored/current']) {
      await mkdir(join(v2, 'repositories/old/image', dir), { recursive: true });
      await writeFile(join(v2, 'repositories/old/image', dir, 'link'), digest);
    }
    const get = await http('GET', `${base}/v2/old/image/manifests/stored`);
    assert.equal(get.status, 200);
    assert.equal(
      get.headers.get('content-type'),
      'application/vnd.docker.distribution.manifest.v1+prettyjws',
    );
    assert.equal(get.headers.get('docker-content-digest'), digest);
    assert.equal(verifySchema1(get.body).toString(), p);
  });

  it('unknown fsLayers are BLOB_UNKNOWN', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const p = payload('old/image', 'missing').replace(layerDigest, sha256('absent'));
    const res = await pushManifest(
      base,
      'old/image',
      'missing',
      signSchema1(p, privateKey).toString(),
      'application/vnd.docker.distribution.manifest.v1+prettyjws',
    );
    assert.equal(res.status, 400);
    assert.deepEqual(errorCodes(res), ['BLOB_UNKNOWN']);
  });
});

describe('referrers (OCI 1.1)', () => {
  it('lists manifests whose subject is the digest, with artifactType and annotations, and filters', async () => {
    const subject = await pushImage(base, 'refs/app', 'v1');
    const empty = await pushBlob(base, 'refs/app', '{}');
    const emptyDesc = { mediaType: 'application/vnd.oci.empty.v1+json', digest: empty, size: 2 };
    const subjectDesc = {
      mediaType: OCI_MANIFEST,
      digest: subject.digest,
      size: Buffer.byteLength(subject.body),
    };
    const sig = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      artifactType: 'application/vnd.example.signature',
      config: emptyDesc,
      layers: [emptyDesc],
      subject: subjectDesc,
      annotations: { 'org.example.kind': 'signature' },
    });
    const sbomConfig = await pushBlob(base, 'refs/app', '{"sbom":true}');
    const sbom = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: 'application/vnd.example.sbom', digest: sbomConfig, size: 13 },
      layers: [emptyDesc],
      subject: subjectDesc,
    });
    const r1 = await pushManifest(base, 'refs/app', sha256(sig), sig, OCI_MANIFEST);
    assert.equal(r1.status, 201);
    assert.equal(r1.headers.get('oci-subject'), subject.digest);
    const r2 = await pushManifest(base, 'refs/app', sha256(sbom), sbom, OCI_MANIFEST);
    assert.equal(r2.status, 201);

    const all = await http('GET', `${base}/v2/refs/app/referrers/${subject.digest}`);
    assert.equal(all.status, 200);
    assert.equal(all.headers.get('content-type'), OCI_INDEX);
    const index = all.json() as {
      schemaVersion: number;
      mediaType: string;
      manifests: Array<Record<string, unknown>>;
    };
    assert.equal(index.schemaVersion, 2);
    assert.equal(index.mediaType, OCI_INDEX);
    const byDigest = new Map(index.manifests.map((m) => [m.digest, m]));
    assert.deepEqual(byDigest.get(sha256(sig)), {
      mediaType: OCI_MANIFEST,
      digest: sha256(sig),
      size: Buffer.byteLength(sig),
      artifactType: 'application/vnd.example.signature',
      annotations: { 'org.example.kind': 'signature' },
    });
    assert.equal(byDigest.get(sha256(sbom))?.artifactType, 'application/vnd.example.sbom');
    assert.equal(all.headers.get('oci-filters-applied'), null);

    const filtered = await http(
      'GET',
      `${base}/v2/refs/app/referrers/${subject.digest}?artifactType=application/vnd.example.sbom`,
    );
    assert.equal(filtered.headers.get('oci-filters-applied'), 'artifactType');
    assert.deepEqual(
      (filtered.json() as { manifests: Array<{ digest: string }> }).manifests.map((m) => m.digest),
      [sha256(sbom)],
    );

    // Deleting a referrer removes it from the index.
    assert.equal((await http('DELETE', `${base}/v2/refs/app/manifests/${sha256(sig)}`)).status, 202);
    const after = await http('GET', `${base}/v2/refs/app/referrers/${subject.digest}`);
    assert.deepEqual(
      (after.json() as { manifests: Array<{ digest: string }> }).manifests.map((m) => m.digest),
      [sha256(sbom)],
    );
  });
  it('an unknown subject gives an empty index; a bad digest is 400 DIGEST_INVALID', async () => {
    const res = await http('GET', `${base}/v2/refs/app/referrers/${sha256('nothing')}`);
    assert.equal(res.status, 200);
    assert.deepEqual((res.json() as { manifests: unknown[] }).manifests, []);
    const bad = await http('GET', `${base}/v2/refs/app/referrers/sha256:xyz`);
    assert.equal(bad.status, 400);
    assert.deepEqual(errorCodes(bad), ['DIGEST_INVALID']);
  });
  it('a manifest whose subject does not exist is accepted (OCI 1.1)', async () => {
    const empty = await pushBlob(base, 'refs/orphan', '{}');
    const emptyDesc = { mediaType: 'application/vnd.oci.empty.v1+json', digest: empty, size: 2 };
    const m = JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      artifactType: 'application/vnd.example.x',
      config: emptyDesc,
      layers: [emptyDesc],
      subject: { mediaType: OCI_MANIFEST, digest: sha256('future'), size: 1 },
    });
    const res = await pushManifest(base, 'refs/orphan', sha256(m), m, OCI_MANIFEST);
    assert.equal(res.status, 201);
    const list = await http('GET', `${base}/v2/refs/orphan/referrers/${sha256('future')}`);
    assert.equal((list.json() as { manifests: unknown[] }).manifests.length, 1);
  });
});

describe('berth.deletetags', () => {
  it('DELETE by tag removes only the tag when configured', async () => {
    const r = await startTestRegistry({ berth: { deletetags: true } });
    try {
      const img = await pushImage(r.url, 'dt', 'v1');
      await pushManifest(r.url, 'dt', 'v2', img.body, OCI_MANIFEST);
      assert.equal((await http('DELETE', `${r.url}/v2/dt/manifests/v1`)).status, 202);
      assert.equal((await http('DELETE', `${r.url}/v2/dt/manifests/v1`)).status, 404);
      const tags = await http('GET', `${r.url}/v2/dt/tags/list`);
      assert.deepEqual((tags.json() as { tags: string[] }).tags, ['v2']);
      const get = await http('GET', `${r.url}/v2/dt/manifests/${img.digest}`, {
        headers: { Accept: ALL_MANIFEST_TYPES },
      });
      assert.equal(get.status, 200);
    } finally {
      await r.stop();
    }
  });
});
