import assert from 'node:assert/strict';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { HostConfig } from '../../../src/common/docker-types.js';
import { readCgroupLayout } from '../../../src/engine/runtime/driver/cgroups.js';
import { helperCompiler, seccompBpfAnnotation } from '../../../src/engine/runtime/driver/seccomp-bpf.js';
import { LogCopier, readLogs } from '../../../src/engine/runtime/index.js';
import type { AttachConnection, RuntimeDriver } from '../../../src/engine/runtime/runtime.types.js';
import { collect, createHarness, type Harness } from './runtime-fixture.js';

describe('runtime driver (crun + conmon)', () => {
  let h: Harness;
  before(async () => {
    h = await createHarness('crun');
  });
  after(async () => {
    await h.cleanup();
  });

  it('left no controller on the cgroup v2 hierarchy (crun refuses hybrid mode otherwise)', async () => {
    const layout = await readCgroupLayout();
    assert.deepEqual(layout.v2Controllers, []);
    assert.match(await h.driver.version(), /^\d+\.\d+/);
    assert.equal(h.driver.name, 'crun');
  });

  it('runs a container, logs its output and records the exit code', async () => {
    const { logPath } = await h.run('c-echo', ['sh', '-c', 'echo hello; echo oops >&2; exit 7']);
    assert.equal((await h.waitExit('c-echo')).exitCode, 7);
    const target = `${logPath}.json`;
    const limits = { maxSize: -1, maxFiles: 1, compress: false };
    await (await LogCopier.start({ source: logPath, target, limits })).finish();
    const got: string[] = [];
    for await (const m of readLogs(target, { stdout: true, stderr: true })) got.push(`${m.stream}:${m.line}`);
    assert.deepEqual(got.sort(), ['stderr:oops\n', 'stdout:hello\n']);
    await h.driver.delete('c-echo');
    assert.equal(await h.driver.state('c-echo'), null);
  });

  it('pauses, resumes, lists pids, kills', async () => {
    const { pid } = await h.run('c-sleep', ['sleep', '100']);
    assert.deepEqual(await h.driver.pids('c-sleep'), [pid]);
    await h.driver.pause('c-sleep');
    assert.equal((await h.driver.state('c-sleep'))?.status, 'paused');
    await h.driver.resume('c-sleep');
    await h.driver.signal('c-sleep', 9);
    assert.equal((await h.waitExit('c-sleep')).exitCode, 137);
  });

  it('runs a TTY and resizes it; stdin reaches cat', async () => {
    let out = '';
    let conn: AttachConnection | undefined;
    await h.run('c-tty', ['sh'], {
      terminal: true,
      stdin: true,
      consoleSize: { height: 10, width: 20 },
      config: { Tty: true, OpenStdin: true },
      beforeStart: async () => {
        conn = await h.driver.attach('c-tty');
        conn.on('stdout', (b: Buffer) => {
          out += b.toString();
        });
      },
    });
    conn!.writeStdin(Buffer.from('stty size\n'));
    for (let i = 0; i < 250 && !out.includes('10 20'); i++) await sleep(20);
    assert.match(out, /10 20/);
    await h.driver.resize('c-tty', 33, 44);
    conn!.writeStdin(Buffer.from('stty size; exit 0\n'));
    assert.equal((await h.waitExit('c-tty')).exitCode, 0);
    assert.match(out, /33 44/);

    let cat: AttachConnection | undefined;
    let got: Promise<{ stdout: string; stderr: string }> | undefined;
    await h.run('c-cat', ['cat'], {
      stdin: true,
      stdinOnce: true,
      beforeStart: async () => {
        cat = await h.driver.attach('c-cat');
        got = collect(cat);
      },
    });
    cat!.writeStdin(Buffer.from('via crun\n'));
    cat!.closeStdin();
    assert.equal((await got!).stdout, 'via crun\n');
    assert.equal((await h.waitExit('c-cat')).exitCode, 0);
  });

  it('records an OOM kill', async () => {
    await h.run('c-oom', ['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=64M', 'count=1'], {
      hostConfig: { Memory: 16 << 20, MemorySwap: 16 << 20 },
    });
    assert.deepEqual(await h.waitExit('c-oom').then((s) => [s.exitCode, s.oomKilled]), [137, true]);
  });

  describe('seccomp filters compiled once (run.oci.seccomp_bpf_data)', () => {
    // allow everything but mkdir/mkdirat (ENOSYS) and personality(0xffffffff) (EACCES)
    const custom = {
      defaultAction: 'SCMP_ACT_ALLOW',
      syscalls: [
        { names: ['mkdir', 'mkdirat'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 },
        {
          names: ['personality'],
          action: 'SCMP_ACT_ERRNO',
          errnoRet: 13,
          args: [{ index: 0, value: 4294967295, op: 'SCMP_CMP_EQ' }],
        },
      ],
    };
    const profiles: [string, HostConfig][] = [
      ['default', {}],
      ['custom', { SecurityOpt: [`seccomp=${JSON.stringify(custom)}`] }],
    ];
    // unshare(CLONE_NEWUSER) needs no capability (the default profile denies it without
    // CAP_SYS_ADMIN); mkdir is allowed by the default profile, denied by the custom one
    const probe = 'unshare -U true && echo unshare=ok; mkdir /tmp/$(hostname) && echo mkdir=ok; echo done';
    let plain: Harness;
    before(async () => {
      plain = await createHarness('crun', { seccompCompiler: null });
    });
    after(async () => {
      await plain.cleanup();
    });

    /** Runs the probe; the filter crun loaded (its state dir's seccomp.bpf) and the output. */
    async function probeWith(harness: Harness, id: string, hostConfig: HostConfig, driver?: RuntimeDriver) {
      let bpf = Buffer.alloc(0);
      const { logPath } = await harness.run(id, ['sh', '-c', probe], {
        hostConfig,
        ...(driver ? { driver } : {}),
        beforeStart: async () => {
          // none without a filter
          bpf = await readFile(join(harness.execRoot, 'crun', id, 'seccomp.bpf')).catch((err: unknown) => {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
            throw err;
          });
        },
      });
      assert.equal((await harness.waitExit(id)).exitCode, 0);
      const config = await readFile(join(harness.dir, 'bundles', id, 'config.json'), 'utf8');
      const records = (await readFile(logPath, 'utf8'))
        .split('\n')
        .map((l) => l.split(' ').slice(3).join(' '));
      return {
        bpf,
        out: records
          .filter((r) => r !== '')
          .map((r) => r.replace(id.slice(0, 12), '<id>'))
          .sort(),
        annotated: config.includes(seccompBpfAnnotation),
      };
    }

    for (const [name, hostConfig] of profiles) {
      it(`${name} profile: crun loads the program compiled once, the same crun compiles itself`, async () => {
        const compiled = await probeWith(h, `bpf-${name}`, hostConfig);
        const byCrun = await probeWith(plain, `crun-${name}`, hostConfig);
        assert.equal(compiled.annotated, true);
        assert.equal(byCrun.annotated, false);
        assert.ok(compiled.bpf.length > 0 && compiled.bpf.length % 8 === 0);
        assert.ok(compiled.bpf.equals(byCrun.bpf), 'the same BPF program');
        assert.deepEqual(compiled.out, byCrun.out);
        if (name === 'default') {
          assert.ok(!compiled.out.includes('unshare=ok'), compiled.out.join('|'));
          assert.ok(compiled.out.includes('mkdir=ok'), compiled.out.join('|'));
        } else {
          assert.ok(compiled.out.includes('unshare=ok'), compiled.out.join('|'));
          assert.ok(
            compiled.out.some((l) => /Function not implemented/.test(l)),
            compiled.out.join('|'),
          );
          assert.ok(!compiled.out.includes('mkdir=ok'), compiled.out.join('|'));
        }
        // compiled again, the same
        const again = await probeWith(h, `bpf-${name}-2`, hostConfig);
        assert.ok(again.bpf.equals(compiled.bpf));
        assert.deepEqual(again.out, compiled.out);
      });
    }

    it('kept on disk: a restarted driver loads the file without compiling; a damaged file is compiled again', async () => {
      const helper = await helperCompiler();
      assert.ok(helper, 'berth-seccomp-bpf is built (npm run build)');
      let compiles = 0;
      const cached = await createHarness('crun', {
        seccompCompiler: (program) => {
          compiles++;
          return helper(program);
        },
      });
      try {
        const first = await probeWith(cached, 'disk-1', {});
        assert.equal(compiles, 1);
        const dir = join(cached.dataRoot, 'runtime', 'seccomp');
        const [name, ...more] = await readdir(dir);
        assert.ok(name && more.length === 0, 'one compiled filter on disk');
        const file = join(dir, name);
        const written = await stat(file);

        // an engine restart: a new driver on the same data root
        const restarted = await cached.newDriver();
        const again = await probeWith(cached, 'disk-2', {}, restarted);
        assert.equal(compiles, 1, 'not compiled again');
        assert.ok(again.bpf.equals(first.bpf), 'crun loaded the same program');
        assert.deepEqual(again.out, first.out);
        assert.equal((await stat(file)).mtimeMs, written.mtimeMs);

        // torn: compiled again, never handed to crun; the file rewritten whole
        const whole = await readFile(file);
        await writeFile(file, whole.subarray(0, whole.length - 16));
        const fresh = await probeWith(cached, 'disk-3', {}, await cached.newDriver());
        assert.equal(compiles, 2);
        assert.ok(fresh.bpf.equals(first.bpf));
        assert.deepEqual(fresh.out, first.out);
        assert.ok(!fresh.out.includes('unshare=ok'), fresh.out.join('|'));
        assert.ok((await readFile(file)).equals(whole));
      } finally {
        await cached.cleanup();
      }
    });

    it('without a filter (unconfined) the probe passes: the denials above come from seccomp', async () => {
      const r = await probeWith(h, 'bpf-none', { SecurityOpt: ['seccomp=unconfined'] });
      assert.equal(r.annotated, false);
      assert.equal(r.bpf.length, 0);
      assert.ok(r.out.includes('unshare=ok') && r.out.includes('mkdir=ok'), r.out.join('|'));
    });
  });
});
