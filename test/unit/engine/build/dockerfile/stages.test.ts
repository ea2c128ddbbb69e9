import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  metaArgEnv,
  parseBuildDockerfile,
  stagesFor,
  stepCount,
} from '../../../../../src/engine/build/dockerfile/index.js';

const DOCKERFILE = [
  'ARG BASE=busybox',
  'ARG TAG=${BASE}x',
  'FROM $BASE AS tools', // 0
  'RUN true',
  'FROM busybox AS unused', // 1
  'RUN true',
  'FROM tools AS Build', // 2
  'COPY --from=3 /a /b', // a later stage: an image named "3"
  'COPY --from=0 /a /b',
  'FROM busybox AS data', // 3
  'FROM busybox AS cache', // 4
  'FROM build AS final', // 5
  'RUN --mount=type=bind,from=cache,target=/c true',
  'COPY --from=other-image:1 /x /y',
  'FROM busybox', // 6
  'COPY --from=1 /u /u',
].join('\n');

describe('stagesFor', () => {
  const p = parseBuildDockerfile(DOCKERFILE);
  const names = (target?: string) => stagesFor(p, target).map((s) => s.name ?? String(s.index));

  it('takes the target and the stages it names, transitively, in file order', () => {
    assert.deepEqual(names('final'), ['tools', 'build', 'cache', 'final']);
    assert.deepEqual(names('FINAL'), ['tools', 'build', 'cache', 'final']);
    assert.deepEqual(names('build'), ['tools', 'build']);
    assert.deepEqual(names('data'), ['data']);
    assert.deepEqual(names('tools'), ['tools']);
    assert.deepEqual(names(), ['unused', '6']);
  });

  it('refuses an unknown target as dockerd', () => {
    assert.throws(() => stagesFor(p, 'nope'), /^BerthError|failed to reach build target nope in Dockerfile$/);
  });

  it('counts the steps as dockerd: the ARGs before FROM, each FROM and instruction', () => {
    assert.equal(stepCount(p, stagesFor(p, 'final')), 2 + 2 + 3 + 1 + 3);
    assert.equal(stepCount(p, stagesFor(p, 'tools')), 2 + 2);
    // dockerd 20.10: "ARG B=busybox / FROM $B / FROM busybox AS A / RUN true / FROM a / RUN true" is 6 steps.
    const q = parseBuildDockerfile('ARG B=busybox\nFROM $B\nFROM busybox AS A\nRUN true\nFROM a\nRUN true\n');
    assert.equal(stepCount(q, stagesFor(q)), 5); // the first stage is not needed by the last
    assert.equal(stepCount(q, q.stages), 6);
  });

  it('resolves FROM through the meta ARGs (defaults and build args)', () => {
    const q = parseBuildDockerfile('ARG S=one\nFROM busybox AS one\nFROM busybox AS two\nFROM $S\n');
    assert.deepEqual(metaArgEnv(q), ['S=one']);
    assert.deepEqual(
      stagesFor(q).map((s) => s.index),
      [0, 2],
    );
    const env = metaArgEnv(q, new Map([['S', 'two']]));
    assert.deepEqual(
      stagesFor(q, undefined, env).map((s) => s.index),
      [1, 2],
    );
    assert.deepEqual(metaArgEnv(p), ['TAG=busyboxx', 'BASE=busybox']);
  });
});
