import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { isKind } from '../../../../src/common/errors.js';
import { parseNormalizedNamed } from '../../../../src/common/reference.js';
import {
  choosePlatform,
  MediaTypes,
  parseManifest,
  registryError,
  schema1Config,
  schema1Layers,
} from '../../../../src/engine/distribution/index.js';
import { platformRank } from '../../../../src/engine/images/platform.js';
import { translate } from '../../../../src/engine/images/pull/puller.js';

const sha = (b: string | Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const d = (c: string) => `sha256:${c.repeat(64)}`;

describe('manifest negotiation', () => {
  it('takes the media type from the header, else from the document', () => {
    const body = Buffer.from(
      JSON.stringify({ schemaVersion: 2, config: { digest: d('a'), size: 1 }, layers: [] }),
    );
    assert.equal(parseManifest(body, MediaTypes.dockerManifest).mediaType, MediaTypes.dockerManifest);
    assert.equal(parseManifest(body, 'application/octet-stream').mediaType, MediaTypes.ociManifest);
    const index = Buffer.from(JSON.stringify({ schemaVersion: 2, manifests: [] }));
    assert.equal(parseManifest(index, undefined).kind, 'index');
  });

  it('checks the digest of a manifest fetched by digest', () => {
    const body = Buffer.from(
      JSON.stringify({ schemaVersion: 2, config: { digest: d('a'), size: 1 }, layers: [] }),
    );
    assert.equal(parseManifest(body, MediaTypes.ociManifest, sha(body)).digest, sha(body));
    assert.throws(() => parseManifest(body, MediaTypes.ociManifest, d('b')), /manifest verification failed/);
  });

  it('picks this platform from an index, or says there is none', () => {
    const index = {
      schemaVersion: 2 as const,
      manifests: [
        {
          mediaType: MediaTypes.ociManifest,
          digest: d('1'),
          size: 1,
          platform: { os: 'linux', architecture: 'arm', variant: 'v7' },
        },
        {
          mediaType: MediaTypes.ociManifest,
          digest: d('2'),
          size: 1,
          platform: { os: 'linux', architecture: 'arm64' },
        },
        {
          mediaType: MediaTypes.ociManifest,
          digest: d('3'),
          size: 1,
          platform: { os: 'linux', architecture: 'amd64' },
        },
        {
          mediaType: MediaTypes.ociManifest,
          digest: d('4'),
          size: 1,
          platform: { os: 'windows', architecture: 'amd64' },
        },
      ],
    };
    const pick = (os: string, architecture: string, variant?: string) =>
      choosePlatform(index, (p) => platformRank({ os, architecture, variant }, p), `${os}/${architecture}`)
        .digest;
    assert.equal(pick('linux', 'amd64'), d('3'));
    assert.equal(pick('linux', 'arm64'), d('2'));
    assert.equal(pick('linux', 'arm', 'v7'), d('1'));
    assert.throws(
      () => pick('linux', 's390x'),
      (e) =>
        isKind(e, 'NotFound') &&
        /no matching manifest for linux\/s390x in the manifest list entries/.test(String(e)),
    );
  });
});

describe('schema 1', () => {
  const v1 = (o: Record<string, unknown>) => ({ v1Compatibility: JSON.stringify(o) });
  const manifest = {
    schemaVersion: 1 as const,
    name: 'team/app',
    tag: 'v1',
    architecture: 'amd64',
    fsLayers: [{ blobSum: d('c') }, { blobSum: d('b') }, { blobSum: d('a') }],
    history: [
      v1({
        id: 'top',
        parent: 'mid',
        created: '2020-01-03T00:00:00Z',
        container_config: { Cmd: ['/bin/sh', '-c', 'echo hi'] },
        config: { Cmd: ['sh'] },
        architecture: 'amd64',
        os: 'linux',
      }),
      v1({
        id: 'mid',
        parent: 'base',
        created: '2020-01-02T00:00:00Z',
        throwaway: true,
        container_config: { Cmd: ['ENV x'] },
      }),
      v1({ id: 'base', created: '2020-01-01T00:00:00Z', container_config: { Cmd: ['ADD file'] } }),
    ],
  };

  it('lists layers bottom first with throwaway ones marked', () => {
    const layers = schema1Layers(manifest);
    assert.deepEqual(
      layers.map((l) => [l.blobSum, l.throwaway]),
      [
        [d('a'), false],
        [d('b'), true],
        [d('c'), false],
      ],
    );
  });

  it("makes the config as moby's MakeConfigFromV1Config does", () => {
    const config = JSON.parse(schema1Config(schema1Layers(manifest), [d('1'), d('3')]).toString());
    assert.deepEqual(Object.keys(config), [
      'architecture',
      'config',
      'container_config',
      'created',
      'history',
      'os',
      'rootfs',
    ]);
    assert.deepEqual(config.rootfs, { type: 'layers', diff_ids: [d('1'), d('3')] });
    assert.deepEqual(config.history, [
      { created: '2020-01-01T00:00:00Z', created_by: 'ADD file' },
      { created: '2020-01-02T00:00:00Z', created_by: 'ENV x', empty_layer: true },
      { created: '2020-01-03T00:00:00Z', created_by: '/bin/sh -c echo hi' },
    ]);
    assert.equal(config.id, undefined);
  });

  it('digests a signed manifest by its payload (libtrust pretty JWS)', () => {
    const payload = JSON.stringify(manifest, null, 3);
    const formatLength = payload.length - 2; // up to the closing "\n}"
    const formatTail = Buffer.from(payload.slice(formatLength)).toString('base64url');
    const protectedHeader = Buffer.from(JSON.stringify({ formatLength, formatTail })).toString('base64url');
    const signed = `${payload.slice(0, formatLength)},\n   "signatures": [{"protected": "${protectedHeader}", "signature": "x"}]\n}`;
    const parsed = parseManifest(Buffer.from(signed), MediaTypes.schema1Signed);
    assert.equal(parsed.kind, 'schema1');
    assert.equal(parsed.digest, sha(payload));
  });
});

describe("pull errors in dockerd's words", () => {
  const ref = parseNormalizedNamed('127.0.0.1:5000/team/app:v1');
  it('manifest unknown, name unknown, denied', () => {
    const e1 = translate(
      registryError({ status: 404, errors: [{ code: 'MANIFEST_UNKNOWN', message: 'manifest unknown' }] }),
      ref,
    );
    assert.ok(isKind(e1, 'NotFound'));
    assert.equal(
      String((e1 as Error).message),
      'manifest for 127.0.0.1:5000/team/app:v1 not found: manifest unknown: manifest unknown',
    );
    const e2 = translate(
      registryError({
        status: 404,
        errors: [{ code: 'NAME_UNKNOWN', message: 'repository name not known to registry' }],
      }),
      ref,
    );
    assert.equal(
      (e2 as Error).message,
      'repository 127.0.0.1:5000/team/app not found: name unknown: repository name not known to registry',
    );
    const e3 = translate(
      registryError({
        status: 403,
        errors: [{ code: 'DENIED', message: 'requested access to the resource is denied' }],
      }),
      ref,
    );
    assert.match(
      (e3 as Error).message,
      /^pull access denied for 127\.0\.0\.1:5000\/team\/app, repository does not exist or may require 'docker login'/,
    );
  });
});
