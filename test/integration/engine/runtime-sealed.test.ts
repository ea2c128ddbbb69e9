import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sysHelper } from '../../../src/common/host/sys-helper.js';
import { createProcessRunner, type ProcessRunner } from '../../../src/engine/runtime/driver/process.js';
import { buildSpec } from '../../../src/engine/runtime/index.js';
import type { OciSpec } from '../../../src/engine/runtime/oci/spec.types.js';
import { eventually } from '../../helpers/eventually.js';
import { createHarness, type Harness } from './runtime-fixture.js';

const sealedExe = /^\/memfd:berth-sealed-runtime/;

/**
 * A container whose createRuntime hook (run by `runtime create`, on the host) records the
 * executable of the runtime that runs it and of the container's init (runc init, crun's fork),
 * as /proc shows them while the create is under way.
 */
async function runRecorded(
  h: Harness,
  id: string,
  cmd: string[],
): Promise<{ runtime: string; init: string }> {
  const out = join(h.dir, `${id}.exe`);
  const base = await buildSpec({
    id,
    rootfs: h.rootfs,
    config: { Cmd: cmd, Hostname: id },
    hostConfig: {},
    hostsPath: '',
    hostnamePath: '',
    resolvConfPath: '',
    cgroupsPath: `/berth-test/${id}`,
    mounts: [],
  });
  const script =
    's=$(cat); pid=$(printf %s "$s" | sed -n \'s/.*"pid": *\\([0-9]*\\).*/\\1/p\'); ' +
    `{ readlink /proc/$PPID/exe; readlink /proc/$pid/exe; } > ${out}`;
  const spec = {
    ...base,
    hooks: { createRuntime: [{ path: '/bin/sh', args: ['sh', '-c', script] }] },
  } as OciSpec;
  h.ids.add(id);
  await h.driver.start({
    id,
    bundleDir: join(h.dir, 'bundles', id),
    spec,
    terminal: false,
    stdin: false,
    stdinOnce: false,
    logPath: join(h.dir, `${id}.log`),
  });
  const [runtime = '', init = ''] = (await readFile(out, 'utf8')).trim().split('\n');
  return { runtime, init };
}

// conmon runs `runtime create` from berth-sys's sealed copy of the runtime (docs/runtime.md, The
// runtime's binary): no copy of its own per container; the runtime's other calls run from it too.
for (const name of ['runc', 'crun'] as const) {
  describe(`the container's runtime create from the sealed copy (${name})`, () => {
    let h: Harness;
    before(async () => {
      assert.ok(sysHelper(), 'berth-sys is built (npm run build)');
      h = await createHarness(name);
    });
    after(async () => {
      await h.cleanup();
    });

    it('runs create from the sealed copy, and the init did not make a copy of its own', async () => {
      const seen = await runRecorded(h, 'sealed1', ['sleep', '1000']);
      assert.match(seen.runtime, sealedExe, `${name} create ran as ${seen.runtime}`);
      // runc init is exec'd through /proc/self/exe: a copy of its own would be runc_cloned's memfd
      assert.match(seen.init, sealedExe, `the init ran as ${seen.init}`);
      await h.driver.signal('sealed1', 9);
      await h.waitExit('sealed1');
    });

    it('keeps working when berth-sys restarts: a running container is stopped and removed, the next created from the new copy', async () => {
      await h.run('sealed2', ['sleep', '1000']);
      const before = sysHelper()?.pid;
      sysHelper()?.stop();
      await eventually('the helper to exit', () =>
        readFile(`/proc/${before}/status`, 'utf8').then(
          (t) => /^State:\s*Z/m.test(t),
          () => true,
        ),
      );
      // kill and state run from the copy of a new helper (asked again), the container still answers
      assert.equal((await h.driver.state('sealed2'))?.status, 'running');
      await h.driver.signal('sealed2', 9);
      assert.equal((await h.waitExit('sealed2')).exitCode, 137);
      await h.driver.delete('sealed2');
      h.ids.delete('sealed2');
      assert.notEqual(sysHelper()?.pid, before);
      const seen = await runRecorded(h, 'sealed3', ['true']);
      assert.match(seen.runtime, sealedExe);
      assert.equal((await h.waitExit('sealed3')).exitCode, 0);
    });
  });
}

for (const name of ['runc', 'crun'] as const) {
  describe(`a sealed copy whose path is gone, its helper died after it was asked (${name})`, () => {
    let h: Harness;
    before(async () => {
      const sys = sysHelper();
      assert.ok(sys, 'berth-sys is built (npm run build)');
      const real = createProcessRunner(sys);
      // the path of a helper that is gone: conmon cannot exec it
      const runner: ProcessRunner = { ...real, runtimePath: async () => '/proc/2147483647/fd/3' };
      h = await createHarness(name, { runner });
    });
    after(async () => {
      await h.cleanup();
    });

    it('creates the container from the binary on disk (the runtime makes its own copy)', async () => {
      const seen = await runRecorded(h, 'gone1', ['true']);
      assert.doesNotMatch(seen.runtime, sealedExe);
      assert.doesNotMatch(seen.init, sealedExe);
      assert.ok(seen.runtime && seen.init, 'the hook ran');
      assert.equal((await h.waitExit('gone1')).exitCode, 0);
    });
  });
}
