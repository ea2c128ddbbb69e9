import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rfc3339Nano } from '../../../../src/common/time.js';
import {
  decodePlatform,
  shapeHistoryItem,
  shapeImageConfig,
  shapeImageInspect,
  shapeImageSummary,
} from '../../../../src/engine/api/images.versions.js';
import { orderedContainerConfig, serializeImageConfig } from '../../../../src/engine/images/config.js';
import type { ImageDetails, ImageRecord } from '../../../../src/engine/images/images.types.js';
import { referenceJson } from '../../../helpers/reference.js';

const ref = (name: string) => referenceJson<Record<string, object>>(name);

const record: ImageRecord = {
  id: `sha256:${'a'.repeat(64)}`,
  config: {
    architecture: 'amd64',
    os: 'linux',
    created: '2026-11-21T07:16:04.901900973Z',
    comment: 'Imported from -',
    docker_version: '0.1.0',
    config: orderedContainerConfig({ Cmd: ['sh'] }),
    container_config: orderedContainerConfig(undefined),
    rootfs: { type: 'layers', diff_ids: [`sha256:${'b'.repeat(64)}`] },
  },
  repoTags: ['busybox:latest'],
  repoDigests: [],
  chainId: `sha256:${'b'.repeat(64)}`,
  size: 1984172,
  created: '2026-11-21T07:16:04.901900973Z',
  parent: '',
};

describe('image API shapes', () => {
  it('inspect has the keys of dockerd 20.10, in order, gated by version', () => {
    const details: ImageDetails = {
      record,
      lastTagTime: null,
      graphDriver: { MergedDir: '/m', UpperDir: '/u', WorkDir: '/w' },
    };
    const v141 = shapeImageInspect(details, '1.41');
    const reference = ref('image-inspect.v1.41.json');
    assert.deepEqual(Object.keys(v141), Object.keys(reference));
    assert.deepEqual(Object.keys(v141.Config as object), Object.keys(reference.Config));
    assert.deepEqual(Object.keys(v141.ContainerConfig as object), Object.keys(reference.ContainerConfig));
    assert.deepEqual(v141.Metadata, { LastTagTime: '0001-01-01T00:00:00Z' });
    assert.equal(v141.VirtualSize, 1984172);
    const v144 = shapeImageInspect(details, '1.44');
    assert.ok(!('VirtualSize' in v144));
    assert.ok('ContainerConfig' in v144, 'kept until 1.45');
  });

  it('list rows and history items have the reference keys', () => {
    const row = shapeImageSummary({ record, repoTags: ['busybox:latest'], repoDigests: [] }, '1.41');
    assert.deepEqual(Object.keys(row), Object.keys(ref('images-list.v1.41.json')[0]));
    assert.equal(row.Containers, -1);
    assert.equal(row.SharedSize, -1);
    assert.equal(row.Created, 1795245364);
    assert.equal(row.RepoDigests, null, 'dockerd 20.10 leaves empty lists null');
    const v144 = shapeImageSummary({ record, repoTags: [], repoDigests: [] }, '1.44');
    assert.ok(!('VirtualSize' in v144));
    assert.deepEqual(v144.RepoDigests, []);
    assert.deepEqual(v144.RepoTags, []);
    // untagged: dockerd 20.10's fake names below 1.43, [] from 1.43 (docker 24)
    const untagged = { record, repoTags: [], repoDigests: [] };
    assert.deepEqual(shapeImageSummary(untagged, '1.42').RepoTags, ['<none>:<none>']);
    assert.deepEqual(shapeImageSummary(untagged, '1.42').RepoDigests, ['<none>@<none>']);
    assert.deepEqual(shapeImageSummary(untagged, '1.43').RepoTags, []);
    assert.deepEqual(shapeImageSummary(untagged, '1.43').RepoDigests, []);
    assert.deepEqual(
      shapeImageSummary({ record, repoTags: ['a:1'], repoDigests: [] }, '1.43').RepoDigests,
      [],
    );
    // Containers: the count when the service counted it
    assert.equal(shapeImageSummary({ ...untagged, containers: 2 }, '1.51').Containers, 2);
    const h = shapeHistoryItem({
      id: record.id,
      created: 1,
      createdBy: '',
      tags: null,
      size: 5,
      comment: 'c',
    });
    assert.deepEqual(Object.keys(h), Object.keys(ref('image-history.v1.41.json')[0]));
  });

  it('inspect by version: Created, legacy Config keys, empty fields (1.44 to 1.52)', () => {
    const bare: ImageRecord = {
      ...record,
      config: { ...record.config, created: undefined, comment: undefined, docker_version: undefined },
    };
    const details: ImageDetails = { record: bare, lastTagTime: null, graphDriver: null };
    assert.equal(shapeImageInspect(details, '1.43').Created, '0001-01-01T00:00:00Z');
    assert.ok(!('Created' in shapeImageInspect(details, '1.44')));
    const v151 = shapeImageInspect(details, '1.51');
    for (const key of ['Parent', 'Comment', 'DockerVersion', 'Author']) assert.equal(v151[key], '', key);
    const v152 = shapeImageInspect(details, '1.52');
    for (const key of ['Parent', 'Comment', 'DockerVersion', 'Author']) assert.ok(!(key in v152), key);
    assert.ok(!('ContainerConfig' in v152) && !('Container' in v152));
    // set ones stay
    const full = shapeImageInspect({ ...details, record }, '1.56');
    assert.equal(full.Comment, 'Imported from -');
    assert.equal(full.DockerVersion, '0.1.0');
    assert.ok(!('Parent' in full));
    assert.ok(!('Identity' in full) && !('Descriptor' in full) && !('Manifests' in full));

    const config = orderedContainerConfig({ Cmd: ['sh'], Env: ['A=1'], StopTimeout: 3 });
    const legacy = [
      'Hostname',
      'Domainname',
      'User',
      'AttachStdin',
      'AttachStdout',
      'AttachStderr',
      'Tty',
      'OpenStdin',
      'StdinOnce',
      'Env',
      'Cmd',
      'Image',
      'Volumes',
      'WorkingDir',
      'Entrypoint',
      'OnBuild',
      'Labels',
      'StopTimeout',
    ];
    assert.deepEqual(Object.keys(shapeImageConfig(config, '1.49') ?? {}), legacy);
    assert.deepEqual(Object.keys(shapeImageConfig(config, '1.50') ?? {}), [
      'User',
      'Env',
      'Cmd',
      'Volumes',
      'WorkingDir',
      'Entrypoint',
      'OnBuild',
      'Labels',
    ]);
    assert.deepEqual(shapeImageConfig(config, '1.52'), { Env: ['A=1'], Cmd: ['sh'] });
    // an image without a config: null as dockerd 20.10, an object from 1.50 (moby's is never nil)
    assert.equal(shapeImageConfig(undefined, '1.49'), null);
    assert.deepEqual(Object.keys(shapeImageConfig(undefined, '1.51') ?? {}).length, 8);
    assert.deepEqual(shapeImageConfig(undefined, '1.52'), {});
  });

  it('decodes JSON OCI platforms as dockerd', () => {
    assert.deepEqual(decodePlatform('{"os":"linux","architecture":"arm64","variant":"v8"}'), {
      os: 'linux',
      architecture: 'arm64',
      variant: 'v8',
    });
    // Go matches keys without regard to case
    assert.deepEqual(decodePlatform('{"OS":"linux","Architecture":"amd64"}'), {
      os: 'linux',
      architecture: 'amd64',
    });
    assert.throws(() => decodePlatform('{"os":"linux"}'), {
      kind: 'InvalidParameter',
      message: 'both OS and Architecture must be provided',
    });
    assert.throws(() => decodePlatform('{"variant":"v7"}'), {
      message: 'optional platform fields provided, but OS and Architecture are missing',
    });
    assert.throws(() => decodePlatform('linux/amd64'), {
      message: "failed to parse platform: invalid character 'l' looking for beginning of value",
    });
    assert.throws(() => decodePlatform('{"os":1}'), {
      message:
        'failed to parse platform: json: cannot unmarshal number into Go struct field Platform.os of type string',
    });
    assert.throws(() => decodePlatform('"linux"'), {
      message: 'failed to parse platform: json: cannot unmarshal string into Go value of type v1.Platform',
    });
  });

  it('writes configs with sorted keys and Go-style nanosecond times', () => {
    assert.equal(
      serializeImageConfig({ os: 'linux', architecture: 'amd64', rootfs: { type: 'layers', diff_ids: [] } }),
      '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}',
    );
    assert.equal(rfc3339Nano(Date.UTC(2026, 0, 2, 3, 4, 5, 600), 0), '2026-01-02T03:04:05.6Z');
    assert.equal(rfc3339Nano(Date.UTC(2026, 0, 2, 3, 4, 5, 0), 0), '2026-01-02T03:04:05Z');
    assert.equal(rfc3339Nano(Date.UTC(2026, 0, 2, 3, 4, 5, 123), 456789), '2026-01-02T03:04:05.123456789Z');
  });
});
