import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, readlink, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { sysHelper } from '../../../src/common/host/sys-helper.js';
import { lookPath } from '../../../src/engine/runtime/driver/process.js';
import type { AttachConnection, Runtime } from '../../../src/engine/runtime/runtime.types.js';
import { eventually } from '../../helpers/eventually.js';
import { collect, createHarness, type Harness } from './runtime-fixture.js';

const run = promisify(execFile);

/** Everything an attach connection receives, as bytes, until it closes. */
function collectBytes(conn: AttachConnection): Promise<{ stdout: Buffer; stderr: Buffer }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  conn.on('stdout', (b: Buffer) => out.push(b));
  conn.on('stderr', (b: Buffer) => err.push(b));
  return new Promise((resolve) =>
    conn.once('close', () => resolve({ stdout: Buffer.concat(out), stderr: Buffer.concat(err) })),
  );
}

/** The processes berth-sys has as children (exec shims while sessions run). */
async function helperChildren(): Promise<number[]> {
  const pid = sysHelper()?.pid;
  if (!pid) return [];
  const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
  return text.trim() ? text.trim().split(/\s+/).map(Number) : [];
}

// A non-TTY exec runs under berth-sys's exec shim, without conmon (docs/runtime.md, Exec).
for (const name of ['runc', 'crun'] as const) {
  describe(`exec without conmon (${name} under the berth-sys exec shim)`, () => {
    let h: Harness;
    let d: Runtime;
    let initPid: number;
    before(async () => {
      assert.ok(sysHelper(), 'berth-sys is built (npm run build)');
      h = await createHarness(name);
      d = h.driver as Runtime;
      initPid = (await h.run('shim', ['sleep', '1000'])).pid;
    });
    after(async () => {
      await h.cleanup();
    });

    it('runs no conmon: the pid is the process in the container, in its cgroups and namespaces', async () => {
      let conn: AttachConnection | undefined;
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      let ready: Promise<unknown> | undefined;
      const p = await d.exec({
        id: 'shim',
        execId: 's1',
        config: { Cmd: ['sh', '-c', 'echo ready; read x; echo got $x'] },
        stdin: true,
        beforeStart: async () => {
          conn = await d.attachExec('s1');
          got = collect(conn);
          ready = new Promise((resolve) => conn?.once('stdout', resolve));
        },
      });
      await ready; // runc may answer just before the process's own execve
      const cmdline = (await readFile(`/proc/${p.pid}/cmdline`, 'utf8')).split('\0');
      assert.deepEqual(cmdline.slice(0, 2), ['sh', '-c']);
      const [cgroup, initCgroup] = await Promise.all(
        [p.pid, initPid].map((pid) => readFile(`/proc/${pid}/cgroup`, 'utf8')),
      );
      assert.equal(cgroup, initCgroup);
      const nsOf = (pid: number, ns: string) => readlink(`/proc/${pid}/ns/${ns}`);
      for (const ns of ['mnt', 'pid', 'net', 'uts', 'ipc'])
        assert.equal(await nsOf(p.pid, ns), await nsOf(initPid, ns), ns);
      // no conmon for it: its parent is the shim, a child of berth-sys
      const ppid = Number(/^PPid:\s*(\d+)$/m.exec(await readFile(`/proc/${p.pid}/status`, 'utf8'))?.[1]);
      assert.ok((await helperChildren()).includes(ppid), 'the process is a child of the exec shim');
      assert.ok(!(await readFile(`/proc/${ppid}/cmdline`, 'utf8')).includes('conmon'));
      conn!.writeStdin(Buffer.from('meow\n'));
      assert.deepEqual(await p.exited, { exitCode: 0 });
      assert.deepEqual(await got, { stdout: 'ready\ngot meow\n', stderr: '' });
    });

    it('runs the runtime from one sealed in-memory copy of its binary (no copy of its own per exec)', async () => {
      const p = await d.exec({ id: 'shim', execId: 'sealed', config: { Cmd: ['true'] }, stdin: false });
      assert.deepEqual(await p.exited, { exitCode: 0 });
      const pid = sysHelper()?.pid;
      const fds = await readdir(`/proc/${pid}/fd`);
      const copies: string[] = [];
      for (const fd of fds) {
        const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
        if (link.startsWith('/memfd:berth-sealed-runtime')) copies.push(`/proc/${pid}/fd/${fd}`);
      }
      const size = (await stat((await lookPath(name)) ?? name)).size;
      const sizes = await Promise.all(copies.map(async (c) => (await stat(c)).size));
      const mine = copies.filter((_, i) => sizes[i] === size);
      assert.equal(mine.length, 1, `one sealed copy of ${name} (${copies.length} copies in all)`);
      // the seals runc and crun look for before they skip their own copy: no write, no resize
      const { stdout } = await run('python3', [
        '-c',
        'import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); print(fcntl.fcntl(fd, fcntl.F_GET_SEALS))',
        mine[0] ?? '',
      ]);
      assert.equal(Number(stdout), 0x1 | 0x2 | 0x4 | 0x8);
    });

    it("gives the process the container's capabilities, seccomp filter, no_new_privs and rlimits; all capabilities when privileged", async () => {
      const fields = /^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):\s*(\S+)$/gm;
      const security = (status: string) => [...status.matchAll(fields)].map((m) => `${m[1]}=${m[2]}`);
      const show = async (execId: string, privileged: boolean) => {
        let got: Promise<{ stdout: string; stderr: string }> | undefined;
        const p = await d.exec({
          id: 'shim',
          execId,
          config: {
            Cmd: ['sh', '-c', 'cat /proc/self/status; cat /proc/self/limits'],
            Privileged: privileged,
          },
          stdin: false,
          beforeStart: async () => {
            got = collect(await d.attachExec(execId));
          },
        });
        assert.deepEqual(await p.exited, { exitCode: 0 });
        return (await got!).stdout;
      };
      const init = await readFile(`/proc/${initPid}/status`, 'utf8');
      const plain = await show('caps', false);
      assert.deepEqual(security(plain), security(init));
      assert.match(plain, /^Seccomp:\s*2$/m);
      const limitsOf = (text: string) => text.split('\n').filter((l) => l.startsWith('Max '));
      assert.deepEqual(limitsOf(plain), limitsOf(await readFile(`/proc/${initPid}/limits`, 'utf8')));
      const privileged = await show('privcaps', true);
      const own = /^CapBnd:\s*(\S+)$/m.exec(await readFile('/proc/self/status', 'utf8'))?.[1];
      assert.match(privileged, new RegExp(`^CapEff:\\s*${own}$`, 'm'));
      assert.notEqual(/^CapEff:\s*(\S+)$/m.exec(plain)?.[1], own);
    });

    it('passes megabytes of stdin through and back in order (a full pipe waits, nothing is lost)', async () => {
      const data = randomBytes(3 * 1024 * 1024 + 17);
      let conn: AttachConnection | undefined;
      let got: Promise<{ stdout: Buffer; stderr: Buffer }> | undefined;
      const p = await d.exec({
        id: 'shim',
        execId: 's2',
        config: { Cmd: ['cat'] },
        stdin: true,
        beforeStart: async () => {
          conn = await d.attachExec('s2');
          got = collectBytes(conn);
        },
      });
      for (let off = 0; off < data.length; off += 100_000)
        conn!.writeStdin(data.subarray(off, off + 100_000));
      conn!.closeStdin();
      assert.deepEqual(await p.exited, { exitCode: 0 });
      const out = await got!;
      assert.equal(out.stdout.length, data.length);
      assert.ok(out.stdout.equals(data));
    });

    it('reports 128+signal for a killed process, and keeps output and exit code apart from its start', async () => {
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      const p = await d.exec({
        id: 'shim',
        execId: 's3',
        config: { Cmd: ['sh', '-c', 'echo before; echo oops >&2; kill -9 $$'] },
        stdin: false,
        beforeStart: async () => {
          got = collect(await d.attachExec('s3'));
        },
      });
      assert.deepEqual(await p.exited, { exitCode: 137 });
      assert.deepEqual(await got, { stdout: 'before\n', stderr: 'oops\n' });
    });

    it('ends the session once the process exited, though a child it left holds its output (at most 2 s)', async () => {
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      const t0 = Date.now();
      const p = await d.exec({
        id: 'shim',
        execId: 's4',
        config: { Cmd: ['sh', '-c', 'sleep 30 & echo started'] },
        stdin: false,
        beforeStart: async () => {
          got = collect(await d.attachExec('s4'));
        },
      });
      assert.deepEqual(await p.exited, { exitCode: 0 });
      assert.deepEqual(await got, { stdout: 'started\n', stderr: '' });
      assert.ok(Date.now() - t0 < 8000, `the session ended ${Date.now() - t0} ms after its start`);
    });

    it('goes on after the client detached: stdin closes, the exit is still reported', async () => {
      let conn: AttachConnection | undefined;
      const p = await d.exec({
        id: 'shim',
        execId: 's5',
        config: { Cmd: ['sh', '-c', 'cat; echo done'] },
        stdin: true,
        beforeStart: async () => {
          conn = await d.attachExec('s5');
        },
      });
      let closed = false;
      conn!.on('close', () => {
        closed = true;
      });
      conn!.close();
      assert.ok(closed);
      assert.deepEqual(await p.exited, { exitCode: 0 });
    });

    it('fails as the runtime does, without the runtime error in the output, and leaves nothing behind', async () => {
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      await assert.rejects(
        d.exec({
          id: 'shim',
          execId: 's6',
          config: { Cmd: ['nosuchcmd'] },
          stdin: false,
          beforeStart: async () => {
            got = collect(await d.attachExec('s6'));
          },
        }),
        /OCI runtime exec failed: .*exec: "nosuchcmd": executable file not found in \$PATH/,
      );
      assert.deepEqual(await got, { stdout: '', stderr: '' });
      await assert.rejects(
        d.exec({ id: 'shim', execId: 's7', config: { Cmd: ['true'], WorkingDir: '/nope' }, stdin: false }),
        /OCI runtime exec failed: .*nope/,
      );
      await eventually('no exec session left', async () => {
        const dirs = await readdir(join(h.execRoot, 'execs')).catch(() => [] as string[]);
        return dirs.length === 0 && (await helperChildren()).length === 0;
      });
    });
  });
}
