import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { allowedArgs, BuildArgs, setEnv } from '../../../../src/engine/build/build-args.js';
import { BuildCacheStore, stepKey } from '../../../../src/engine/build/build-cache.js';
import { type BuildMessage, BuildOutput } from '../../../../src/engine/build/build-output.js';
import { CacheMounts } from '../../../../src/engine/build/cache-mounts.js';
import { applyMetadata, nopArgv } from '../../../../src/engine/build/step-metadata.js';

describe('build output', () => {
  it('writes the classic builder lines and the aux ID', () => {
    const got: BuildMessage[] = [];
    const out = new BuildOutput((m) => got.push(m), false);
    out.step(2, 3, 'RUN echo hi');
    out.runningIn('0123456789abcdef');
    out.output('stdout', Buffer.from('hi\n'));
    out.output('stderr', Buffer.from('oops\n'));
    out.removing('0123456789abcdef');
    out.image('sha256:fedcba9876543210aaaa');
    out.aux('sha256:fedcba9876543210aaaa');
    out.success('sha256:fedcba9876543210aaaa', ['a:1'], ['X', 'Y']);
    assert.deepEqual(got, [
      { stream: 'Step 2/3 : RUN echo hi' },
      { stream: '\n' },
      { stream: ' ---> Running in 0123456789ab\n' },
      { stream: 'hi\n' },
      { stream: '\u001b[91moops\n\u001b[0m' },
      { stream: 'Removing intermediate container 0123456789ab\n' },
      { stream: ' ---> fedcba987654\n' },
      { aux: { ID: 'sha256:fedcba9876543210aaaa' } },
      { stream: '[Warning] One or more build-args [X Y] were not consumed\n' },
      { stream: 'Successfully built fedcba987654\n' },
      { stream: 'Successfully tagged a:1\n' },
    ]);
  });

  it('holds everything back when quiet: the ID on success, the output then the error on failure', () => {
    const ok: BuildMessage[] = [];
    const quiet = new BuildOutput((m) => ok.push(m), true);
    quiet.step(1, 1, 'FROM busybox');
    quiet.aux('sha256:abc');
    quiet.success('sha256:abc', ['t'], []);
    assert.deepEqual(ok, [{ stream: 'sha256:abc\n' }]);
    const failed: BuildMessage[] = [];
    const q2 = new BuildOutput((m) => failed.push(m), true);
    q2.text('Step 1/1 : RUN false');
    q2.failure("The command '/bin/sh -c false' returned a non-zero code: 1", 1);
    assert.deepEqual(failed, [
      { stream: 'Step 1/1 : RUN false' },
      {
        errorDetail: { code: 1, message: "The command '/bin/sh -c false' returned a non-zero code: 1" },
        error: "The command '/bin/sh -c false' returned a non-zero code: 1",
      },
    ]);
  });
});

describe('build args', () => {
  it('takes the client value, then the default, then the meta ARG, and reports the unused', () => {
    const args = new BuildArgs(
      new Map<string, string | null>([
        ['A', 'given'],
        ['UNUSED', 'x'],
        ['HTTP_PROXY', 'http://p'],
      ]),
    );
    args.declareMeta('M', 'meta');
    assert.deepEqual(args.metaEnv(), ['M=meta']);
    assert.equal(args.declare('A', 'default'), 'given');
    assert.equal(args.declare('B', 'default'), 'default');
    assert.equal(args.declare('M', undefined), 'meta');
    assert.deepEqual(args.predefined(), [['HTTP_PROXY', 'http://p']]);
    assert.deepEqual(args.unused(), ['UNUSED']);
  });

  it('lets the env win over an ARG of the same name, and sets env entries in place', () => {
    const declared = new Map<string, string | undefined>([
      ['A', '1'],
      ['B', '2'],
      ['C', undefined],
    ]);
    assert.deepEqual(allowedArgs(declared, [['NO_PROXY', 'x']], ['B=env']), [
      ['A', '1'],
      ['NO_PROXY', 'x'],
    ]);
    assert.deepEqual(setEnv(['A=1', 'B=2'], 'A', '3'), ['A=3', 'B=2']);
    assert.deepEqual(setEnv(['A=1'], 'B', '2'), ['A=1', 'B=2']);
  });
});

describe('metadata steps', () => {
  it('makes the committed Cmd from the history text with the stage shell', () => {
    assert.deepEqual(nopArgv('/bin/sh -c #(nop)  ENV A=b', ['/bin/sh', '-c'], false), [
      '/bin/sh',
      '-c',
      '#(nop) ',
      'ENV A=b',
    ]);
    assert.deepEqual(nopArgv('/bin/sh -c #(nop) WORKDIR /x', ['/bin/sh', '-c'], true), [
      '/bin/sh',
      '-c',
      '#(nop) WORKDIR /x',
    ]);
  });

  it('applies config changes as dockerd: ENTRYPOINT drops an inherited CMD, EXPOSE adds /tcp', () => {
    const base = { Cmd: ['sh'], Env: ['PATH=/bin'] };
    const ep = applyMetadata(
      { kind: 'entrypoint', cmdLine: ['top'], prependShell: false, line: 1, endLine: 1, original: '' },
      base,
      false,
    );
    assert.deepEqual(ep.config.Entrypoint, ['top']);
    assert.equal(ep.config.Cmd, null);
    const kept = applyMetadata(
      { kind: 'entrypoint', cmdLine: ['top'], prependShell: false, line: 1, endLine: 1, original: '' },
      base,
      true,
    );
    assert.deepEqual(kept.config.Cmd, ['sh']);
    const ports = applyMetadata(
      { kind: 'expose', ports: ['80', '53/UDP', '7000-7001'], line: 1, endLine: 1, original: '' },
      base,
      false,
    );
    assert.deepEqual(ports.config.ExposedPorts, {
      '80/tcp': {},
      '53/udp': {},
      '7000/tcp': {},
      '7001/tcp': {},
    });
    const env = applyMetadata(
      { kind: 'env', pairs: [['PATH', '/x']], line: 1, endLine: 1, original: '' },
      base,
      false,
    );
    assert.deepEqual(env.config.Env, ['PATH=/x']);
  });
});

describe('build cache records', () => {
  it('persist, are found by key and survive a reload', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-cache-'));
    try {
      const key = stepKey({ parent: 'sha256:p', cmd: ['/bin/sh', '-c', 'true'], config: '{}' });
      assert.notEqual(
        key,
        stepKey({ parent: 'sha256:p', cmd: ['/bin/sh', '-c', 'true'], config: '{}', sources: 'x' }),
      );
      const store = new BuildCacheStore(dir);
      await store.init();
      const r = await store.put(key, 'sha256:i', 'sha256:p', 'RUN true');
      await store.touch(r);
      const again = new BuildCacheStore(dir);
      await again.init();
      assert.equal(again.get(key)?.imageId, 'sha256:i');
      assert.equal(again.get(key)?.usageCount, 2);
      await again.remove(key);
      assert.deepEqual(await readdir(join(dir, 'build', 'cache')), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps cache mounts per id, locked ones one holder at a time', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-cachemount-'));
    try {
      const mounts = new CacheMounts(dir);
      await mounts.init();
      const a = await mounts.acquire('/root/.cache', 'locked', {});
      let second = false;
      const b = mounts.acquire('/root/.cache', 'locked', {}).then((h) => {
        second = true;
        return h;
      });
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(second, false);
      await a.release();
      const held = await b;
      assert.equal(held.path, a.path);
      const listed = await mounts.list();
      assert.equal(listed.length, 1);
      assert.equal(listed[0]?.inUse, true);
      await held.release();
      assert.equal(await mounts.remove(listed[0]?.key ?? ''), true);
      assert.deepEqual(await mounts.list(), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
