import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { SysCallError, SysHelper, sysHelper, sysHelperPath } from '../../../src/common/host/sys-helper.js';
import { unmountWithRetry } from '../../../src/common/host/unmount.js';
import { HostNetnsOps } from '../../../src/engine/network/adapters/netns.ops.js';
import { createProcessRunner } from '../../../src/engine/runtime/driver/process.js';
import type { Runtime } from '../../../src/engine/runtime/runtime.types.js';
import { HostStorageOps } from '../../../src/engine/storage/adapters/host.ops.js';
import { eventually } from '../../helpers/eventually.js';
import { collect, createHarness, type Harness } from './runtime-fixture.js';

const run = promisify(execFile);

async function isMounted(path: string): Promise<boolean> {
  const mounts = await readFile('/proc/self/mountinfo', 'utf8');
  return mounts.split('\n').some((l) => l.split(' ')[4] === path);
}

/** The links of the network namespace bound at `path`, as `ip -br link` prints them. */
async function linksIn(path: string): Promise<string> {
  return (await run('nsenter', [`--net=${path}`, 'ip', '-br', 'link'])).stdout;
}

describe('berth-sys (the native helper) and the ways without it', () => {
  let dir: string;
  let helper: SysHelper;
  before(async () => {
    assert.ok(sysHelper(), `berth-sys is built by npm run build (${sysHelperPath})`);
    helper = new SysHelper(sysHelperPath);
    dir = await mkdtemp(join(tmpdir(), 'berth-sys-'));
  });
  after(async () => {
    helper.stop();
    for (const m of ['m1', 'm2', 'ov-a/merged', 'ov-b/merged']) await unmountWithRetry(join(dir, m), null);
    await rm(dir, { recursive: true, force: true });
  });

  it('mounts and unmounts with system calls; errors carry the errno', async () => {
    const target = join(dir, 'm1');
    await mkdir(target);
    await helper.mount({ source: 'tmpfs', fstype: 'tmpfs', target, data: 'size=1m' });
    assert.ok(await isMounted(target));
    await helper.umount(target);
    assert.equal(await isMounted(target), false);
    await assert.rejects(
      helper.umount(target),
      (e: unknown) => e instanceof SysCallError && e.code === 'EINVAL',
    );
    await assert.rejects(
      helper.mount({ source: 'x', fstype: 'nosuchfs', target }),
      (e: unknown) => e instanceof SysCallError && e.code === 'ENODEV',
    );
    // not mounted, or gone: no error, with and without the helper
    await unmountWithRetry(target, helper);
    await unmountWithRetry(join(dir, 'missing'), helper);
    await unmountWithRetry(target, null);
  });

  for (const withHelper of [true, false]) {
    it(`mounts an overlay with layer paths relative to cwd (${withHelper ? 'berth-sys' : 'mount(8)'})`, async () => {
      const ops = new HostStorageOps(withHelper ? helper : null);
      const base = join(dir, withHelper ? 'ov-a' : 'ov-b');
      for (const d of ['l1', 'l2', 'up', 'work', 'merged']) await mkdir(join(base, d), { recursive: true });
      await writeFile(join(base, 'l1', 'a'), 'from l1');
      await writeFile(join(base, 'l2', 'b'), 'from l2');
      const merged = join(base, 'merged');
      await ops.mountOverlay({
        cwd: base,
        lowerdirs: ['l2', 'l1'],
        upperdir: 'up',
        workdir: 'work',
        target: merged,
      });
      assert.equal(await readFile(join(merged, 'a'), 'utf8'), 'from l1');
      assert.equal(await readFile(join(merged, 'b'), 'utf8'), 'from l2');
      await ops.unmount(merged);
      assert.equal(await isMounted(merged), false);
      await assert.rejects(
        ops.mountOverlay({ cwd: base, lowerdirs: ['nothere'], target: merged }),
        /mount -t overlay|overlay/,
      );
    });

    it(`makes a network namespace with lo up and removes it (${withHelper ? 'berth-sys' : 'unshare(1)'})`, async () => {
      const ops = new HostNetnsOps(withHelper ? helper : null);
      const path = join(dir, 'netns', withHelper ? 'a' : 'b');
      await ops.create(path);
      assert.match(await linksIn(path), /^lo\s+UNKNOWN.*<LOOPBACK,UP,LOWER_UP>/m);
      assert.doesNotMatch(await linksIn(path), /^eth|docker|berth/m);
      assert.ok(await isMounted(path));
      await ops.remove(path);
      assert.equal(await isMounted(path), false);
      await ops.remove(path);
    });
  }

  it('stays in the host network namespace after making one', async () => {
    const { stdout: before } = await run('readlink', ['/proc/self/ns/net']);
    const path = join(dir, 'netns', 'c');
    await new HostNetnsOps(helper).create(path);
    const pid = helper.pid;
    assert.ok(pid);
    const { stdout: helperNs } = await run('readlink', [`/proc/${pid}/ns/net`]);
    assert.equal(helperNs, before);
    await new HostNetnsOps(helper).remove(path);
  });

  it('spawns in a new session with only the descriptors asked for, and reports exec failures', async () => {
    const c = await helper.spawn({
      file: '/bin/sh',
      args: ['-c', 'ls /proc/self/fd; echo err >&2; read x; echo "got $x" >&3; exit 7'],
      env: { PATH: '/usr/bin:/bin' },
      fds: 'rwww',
    });
    assert.ok(c.pid > 0);
    const out: Record<number, string> = { 1: '', 2: '', 3: '' };
    const ended = [1, 2, 3].map(
      (fd) =>
        new Promise<void>((resolve) =>
          c.onData(fd, (b) => {
            if (b) out[fd] += b.toString();
            else resolve();
          }),
        ),
    );
    await c.write(0, 'hello\n');
    const status = await c.exited;
    await Promise.all(ended);
    assert.equal(((status ?? 0) >> 8) & 0xff, 7);
    // ls's own directory descriptor is the only one above those given
    assert.deepEqual(out[1]?.trim().split('\n').map(Number).sort(), [0, 1, 2, 3, 4]);
    assert.equal(out[2], 'err\n');
    assert.equal(out[3], 'got hello\n');
    await assert.rejects(
      helper.spawn({ file: '/nonexistent/prog', args: [], env: {}, fds: 'nnn' }),
      (e: unknown) => e instanceof SysCallError && e.code === 'ENOENT',
    );
  });

  it('a failed exec leaves the helper idle: the process it serves can still exit', async () => {
    // The EXIT event of a child whose exec failed can come before the failed answer; the helper
    // used to stay busy (ref'd) for good then, and a test whose set-up failed so hung.
    const script = [
      `import { SysHelper } from ${JSON.stringify(join(import.meta.dirname, '../../../src/common/host/sys-helper.ts'))};`,
      `const h = new SysHelper(${JSON.stringify(sysHelperPath)});`,
      "for (let i = 0; i < 3; i++) await h.spawn({ file: '/nonexistent/prog', args: [], env: {}, fds: 'nww' }).catch(() => undefined);",
      "console.log('done');",
    ].join('\n');
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(r.signal, null, `still running after 20 s: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'done');
  });

  it('a runner through the helper finds a bare program name on PATH, as Node spawn does', async () => {
    const runner = createProcessRunner(helper);
    const r = await runner.run('mount', ['--version']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /mount from util-linux/);
  });

  it('keeps a write a full pipe cannot take until the child reads it; a close waits for it', async () => {
    // the child reads nothing for a while: 512 KiB cannot go into its pipe (64 KiB) at once
    const c = await helper.spawn({
      file: '/bin/sh',
      args: ['-c', 'sleep 0.3; exec cat'],
      env: { PATH: '/usr/bin:/bin' },
      fds: 'rw',
    });
    const chunks: Buffer[] = [];
    const ended = new Promise<void>((resolve) =>
      c.onData(1, (b) => {
        if (b) chunks.push(b);
        else resolve();
      }),
    );
    const data = Buffer.alloc(512 * 1024, 'x');
    const t0 = Date.now();
    const written = c.write(0, data);
    // requests go on meanwhile
    await helper.umount(join(dir, 'not-mounted')).catch(() => undefined);
    assert.ok(Date.now() - t0 < 250, 'the helper answered another request while the write was kept');
    c.close(0); // after the kept write: cat sees all of it, then EOF
    await written;
    await ended;
    assert.equal(Buffer.concat(chunks).length, data.length);
    assert.equal(await c.exited, 0);
    // a second write while one is kept is refused, never mixed
    const d = await helper.spawn({ file: '/bin/sleep', args: ['0.3'], env: {}, fds: 'rn' });
    const first = d.write(0, data);
    await assert.rejects(d.write(0, 'y'), (e: unknown) => e instanceof SysCallError && e.code === 'EBUSY');
    // the child ends without reading: the kept write fails
    await assert.rejects(first, (e: unknown) => e instanceof SysCallError && e.code === 'EPIPE');
    d.close();
  });

  it('keeps no descriptor but its stdio and its own SIGCHLD pipe', async () => {
    await helper.umount(join(dir, 'not-mounted')).catch(() => undefined);
    const fds = await readdir(`/proc/${helper.pid}/fd`);
    assert.deepEqual(fds.map(Number).sort(), [0, 1, 2, 3, 4]);
  });

  it('runs an exec shim: spec written, the runtime from a sealed copy made again when the file changed', async () => {
    // a stand-in runtime: an ELF that prints what it was given, from a file we can change
    // (busybox, named sh: its argv[0] is the file's path)
    await mkdir(join(dir, 'rt'), { recursive: true });
    const runtime = join(dir, 'rt', 'sh');
    await writeFile(runtime, await readFile('/bin/busybox'), { mode: 0o755 });
    const copies = async () => {
      const pid = helper.pid ?? 0;
      const sizes: number[] = [];
      for (const fd of await readdir(`/proc/${pid}/fd`)) {
        const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
        if (link.startsWith('/memfd:berth-sealed-runtime'))
          sizes.push((await stat(`/proc/${pid}/fd/${fd}`)).size);
      }
      return sizes;
    };
    const shim = async (tag: string) => {
      const c = await helper.execShim({
        file: runtime,
        args: ['-c', `cat ${join(dir, `${tag}.json`)}; echo $$ > ${join(dir, `${tag}.pid`)}`],
        env: { PATH: '/usr/bin:/bin' },
        fds: 'nwww',
        pidFile: join(dir, `${tag}.pid`),
        specFile: join(dir, `${tag}.json`),
        spec: '{"args":["true"]}',
        cleanup: [join(dir, `${tag}.json`)],
      });
      const out: Record<number, string> = { 1: '', 3: '' };
      const ended = [1, 3].map(
        (fd) =>
          new Promise<void>((resolve) =>
            c.onData(fd, (b) => {
              if (b) out[fd] += b.toString();
              else resolve();
            }),
          ),
      );
      await Promise.all(ended);
      return out;
    };
    const first = await shim('a');
    assert.equal(first[1], '{"args":["true"]}');
    // the runtime exited 0 and left its pid file: its pid is reported, then (the pid being its own,
    // already reaped) the shim finds no such child and reports -1
    const pid = Number(/^\{"data": (\d+)\}$/m.exec(first[3] ?? '')?.[1]);
    assert.ok(pid > 0, first[3]);
    await assert.rejects(stat(join(dir, 'a.json')), /ENOENT/); // removed by the shim after the start
    await assert.rejects(stat(join(dir, 'a.pid')), /ENOENT/);
    const size = (await stat(runtime)).size;
    assert.deepEqual(await copies(), [size]);
    await shim('b');
    assert.deepEqual(await copies(), [size]); // the same copy
    await writeFile(runtime, Buffer.alloc(16), { flag: 'a' }); // an upgrade
    await shim('c');
    assert.deepEqual(await copies(), [size + 16]);
  });

  it("hands out the sealed copy's path (conmon's -r) and runs a runtime from it (RUN)", async () => {
    // the stand-in runtime of the test before: busybox as `sh`, its sealed copy made already
    const runtime = join(dir, 'rt', 'sh');
    const path = await helper.sealedPath(runtime);
    assert.match(path ?? '', new RegExp(`^/proc/${helper.pid}/fd/\\d+$`));
    assert.match(await readlink(path ?? ''), /^\/memfd:berth-sealed-runtime/);
    assert.equal((await stat(path ?? '')).size, (await stat(runtime)).size);
    assert.equal(await helper.sealedPath(runtime), path, 'the same copy');
    const exe = 'readlink /proc/$$/exe';
    // another process (not the helper's child) execs the copy through the helper's /proc entry
    const other = spawnSync(path ?? '', ['-c', exe], { argv0: 'sh', encoding: 'utf8' });
    assert.match(other.stdout, /^\/memfd:berth-sealed-runtime/);
    const c = await helper.spawnSealed({ file: runtime, args: ['-c', exe], env: {}, fds: 'nwn' });
    let out = '';
    await new Promise<void>((resolve) =>
      c.onData(1, (b) => {
        if (b) out += b.toString();
        else resolve();
      }),
    );
    assert.match(out, /^\/memfd:berth-sealed-runtime/);
    assert.equal(await c.exited, 0);
    // no copy: none for a file that is not there (RUN runs a file without one from its path)
    assert.equal(await helper.sealedPath(join(dir, 'rt', 'missing')), null);
    const plain = await helper.spawnSealed({ file: '/bin/echo', args: ['plain'], env: {}, fds: 'nwn' });
    assert.equal(await plain.exited, 0);
  });

  it('kills a helper that does not answer in time and fails the request', async () => {
    const slow = new SysHelper(sysHelperPath, 300);
    const target = join(dir, 'm3');
    await mkdir(target, { recursive: true });
    await slow.mount({ source: 'tmpfs', fstype: 'tmpfs', target });
    const pid = slow.pid;
    assert.ok(pid);
    process.kill(pid, 'SIGSTOP'); // as if stuck in the kernel
    await assert.rejects(slow.umount(target), /the berth-sys helper exited \(SIGKILL\)/);
    await slow.umount(target);
    assert.notEqual(slow.pid, pid);
    slow.stop();
  });

  it('fails what is in flight when the helper dies, and starts again on the next call', async () => {
    const sleeper = await helper.spawn({ file: '/bin/sleep', args: ['30'], env: {}, fds: 'nwn' });
    const eof = new Promise<Buffer | null>((resolve) => sleeper.onData(1, (b) => resolve(b)));
    const target = join(dir, 'm2');
    await mkdir(target, { recursive: true });
    const pid = helper.pid;
    assert.ok(pid);
    // the request goes to the killed helper before its exit is seen (no await in between)
    process.kill(pid, 'SIGKILL');
    await assert.rejects(
      helper.mount({ source: 'tmpfs', fstype: 'tmpfs', target }),
      /the berth-sys helper exited/,
    );
    assert.equal(await sleeper.exited, null);
    assert.equal(await eof, null);
    // the child lives on (its own session); the next call has a new helper
    process.kill(sleeper.pid, 'SIGKILL');
    await helper.mount({ source: 'tmpfs', fstype: 'tmpfs', target });
    assert.notEqual(helper.pid, pid);
    await helper.umount(target);
  });
});

describe('runtime driver without berth-sys (Node spawn, bash closing inherited descriptors)', () => {
  let h: Harness;
  before(async () => {
    h = await createHarness('crun', { runner: createProcessRunner(null) });
  });
  after(async () => {
    await h.cleanup();
  });

  it('runs a container, an attached exec, and a runtime command', async () => {
    await h.run('fb', ['sleep', '1000']);
    const d = h.driver as Runtime;
    let got: Promise<{ stdout: string; stderr: string }> | undefined;
    const p = await d.exec({
      id: 'fb',
      execId: 'fbe',
      config: { Cmd: ['sh', '-c', 'echo hi; exit 3'] },
      stdin: false,
      beforeStart: async () => {
        got = collect(await d.attachExec('fbe'));
      },
    });
    assert.deepEqual(await p.exited, { exitCode: 3 });
    assert.deepEqual(await got, { stdout: 'hi\n', stderr: '' });
    assert.ok((await d.pids('fb')).length >= 1);
    await d.signal('fb', 9);
    assert.equal((await h.waitExit('fb')).exitCode, 137);
  });
});

describe('runtime driver through berth-sys: nothing kept per exec session', () => {
  let h: Harness;
  before(async () => {
    h = await createHarness('crun');
  });
  after(async () => {
    await h.cleanup();
  });

  it("closes each session's pipes in the helper once it ended", async () => {
    await h.run('kept', ['sleep', '1000']);
    const d = h.driver as Runtime;
    for (let i = 0; i < 5; i++) {
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      const p = await d.exec({
        id: 'kept',
        execId: `k${i}`,
        config: { Cmd: ['echo', String(i)] },
        stdin: false,
        beforeStart: async () => {
          got = collect(await d.attachExec(`k${i}`));
        },
      });
      assert.deepEqual(await p.exited, { exitCode: 0 });
      assert.equal((await got)?.stdout, `${i}\n`);
    }
    const pid = sysHelper()?.pid;
    assert.ok(pid);
    await eventually('the helper back to its own descriptors', async () => {
      const fds = await readdir(`/proc/${pid}/fd`);
      // besides its stdio and SIGCHLD pipe: the sealed copy of each runtime it ran (docs/runtime.md)
      const links = await Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')));
      return links.filter((l) => !l.startsWith('/memfd:berth-sealed-runtime')).length === 5;
    });
  });
});
