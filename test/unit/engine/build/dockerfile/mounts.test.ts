import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRunMount } from '../../../../../src/engine/build/dockerfile/index.js';
import { csvFields, ramInBytes } from '../../../../../src/engine/build/dockerfile/mounts.js';

describe('RUN --mount values', () => {
  it('reads CSV fields as Go encoding/csv', () => {
    assert.deepEqual(csvFields('a=1,"b=x,y","c="""""'), ['a=1', 'b=x,y', 'c=""']);
    assert.throws(() => csvFields('c=""'), /bare " in non-quoted-field/);
    assert.deepEqual(csvFields(''), ['']);
    assert.throws(() => csvFields('a="x'), /failed to parse csv mounts/);
    assert.throws(() => csvFields('"a"b'), /failed to parse csv mounts/);
  });

  it('defaults as buildkit: bind from the context read-only, secret and ssh without a target', () => {
    assert.deepEqual(parseRunMount('target=/x'), { type: 'bind', target: '/x', readonly: true });
    assert.deepEqual(parseRunMount('type=bind,target=/x,readwrite=true'), {
      type: 'bind',
      target: '/x',
      readonly: false,
    });
    assert.deepEqual(parseRunMount('type=cache,target=/x,ro'), {
      type: 'cache',
      target: '/x',
      readonly: true,
    });
    assert.deepEqual(parseRunMount('type=secret,id=tok,required,mode=0400'), {
      type: 'secret',
      target: '',
      readonly: true,
      id: 'tok',
      mode: 0o400,
    });
    assert.deepEqual(parseRunMount('type=ssh'), { type: 'ssh', target: '', readonly: true });
    assert.deepEqual(parseRunMount('TYPE=TMPFS,Target=/t'), { type: 'tmpfs', target: '/t', readonly: false });
    assert.throws(() => parseRunMount('type=secret,src=a,id=b'), /both source and id can't be set/);
    assert.throws(() => parseRunMount('type=secret,from=x,target=/s'), /secret mount should not have a from/);
    assert.throws(
      () => parseRunMount('target=/x,required'),
      /unexpected key 'required' for mount type 'bind'/,
    );
  });

  it('reads sizes as go-units RAMInBytes', () => {
    assert.deepEqual(['100', '1k', '64m', '1.5g', '2GiB', '10 MB', 'x', '-1'].map(ramInBytes), [
      100,
      1024,
      64 * 1024 ** 2,
      1.5 * 1024 ** 3,
      2 * 1024 ** 3,
      10 * 1024 ** 2,
      undefined,
      undefined,
    ]);
  });
});
