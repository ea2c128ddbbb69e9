import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rfc3339Nano } from '../../../../src/common/time.js';
import {
  shapeHistoryItem,
  shapeImageInspect,
  shapeImageSummary,
} from '../../../../src/engine/api/images.routes.js';
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
