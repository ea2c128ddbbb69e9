import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { isKind } from '../../../src/common/errors.js';
import type { AttachConnection, Runtime } from '../../../src/engine/runtime/runtime.types.js';
import { collect, createHarness, type Harness } from './runtime-fixture.js';

for (const name of ['runc', 'crun'] as const) {
  describe(`exec (${name} + conmon)`, () => {
    let h: Harness;
    let d: Runtime;
    before(async () => {
      h = await createHarness(name);
      d = h.driver as Runtime;
      await h.run('box', ['sleep', '1000'], { config: { Env: ['FOO=bar'], WorkingDir: '/tmp' } });
    });
    after(async () => {
      await h.cleanup();
    });

    it('runs a command with the container environment, separate stdout/stderr and its exit code', async () => {
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      const p = await d.exec({
        id: 'box',
        execId: 'e1',
        config: { Cmd: ['sh', '-c', 'echo $FOO $HOSTNAME; pwd; echo err >&2; exit 5'] },
        stdin: false,
        beforeStart: async () => {
          got = collect(await d.attachExec('e1'));
        },
      });
      assert.ok(p.pid > 0);
      assert.deepEqual(await p.exited, { exitCode: 5 });
      assert.deepEqual(await got, { stdout: 'bar box\n/tmp\n', stderr: 'err\n' });
    });

    it('takes User, WorkingDir and Env of the exec', async () => {
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      const p = await d.exec({
        id: 'box',
        execId: 'e2',
        config: {
          Cmd: ['sh', '-c', 'id -u; pwd; echo $FOO'],
          User: 'nobody',
          WorkingDir: '/',
          Env: ['FOO=baz'],
        },
        stdin: false,
        beforeStart: async () => {
          got = collect(await d.attachExec('e2'));
        },
      });
      assert.equal((await p.exited).exitCode, 0);
      assert.equal((await got!).stdout, '65534\n/\nbaz\n');
    });

    it('passes stdin, ends on closeStdin', async () => {
      let conn: AttachConnection | undefined;
      let got: Promise<{ stdout: string; stderr: string }> | undefined;
      const p = await d.exec({
        id: 'box',
        execId: 'e3',
        config: { Cmd: ['cat'] },
        stdin: true,
        beforeStart: async () => {
          conn = await d.attachExec('e3');
          got = collect(conn);
        },
      });
      conn!.writeStdin(Buffer.from('meow\n'));
      conn!.closeStdin();
      assert.equal((await got!).stdout, 'meow\n');
      assert.equal((await p.exited).exitCode, 0);
    });

    it('runs a TTY with its size and resizes it', async () => {
      let out = '';
      let conn: AttachConnection | undefined;
      const p = await d.exec({
        id: 'box',
        execId: 'e4',
        config: { Cmd: ['sh'], Tty: true },
        stdin: true,
        consoleSize: { height: 12, width: 34 },
        beforeStart: async () => {
          conn = await d.attachExec('e4');
          conn.on('stdout', (b: Buffer) => {
            out += b.toString();
          });
        },
      });
      conn!.writeStdin(Buffer.from('stty size\n'));
      for (let i = 0; i < 250 && !out.includes('12 34'); i++) await sleep(20);
      await d.resizeExec('e4', 50, 60);
      conn!.writeStdin(Buffer.from('stty size; exit 3\n'));
      assert.deepEqual(await p.exited, { exitCode: 3 });
      assert.match(out, /12 34/);
      assert.match(out, /50 60/);
    });

    it('runs detached, and reports a missing command', async () => {
      const p = await d.exec({
        id: 'box',
        execId: 'e5',
        config: { Cmd: ['sh', '-c', 'exit 7'] },
        stdin: false,
      });
      assert.deepEqual(await p.exited, { exitCode: 7 });
      await assert.rejects(
        d.exec({ id: 'box', execId: 'e6', config: { Cmd: ['/no/such/thing'] }, stdin: false }),
        /OCI runtime exec failed: .*no\/such\/thing/,
      );
      await assert.rejects(
        d.exec({ id: 'nope', execId: 'e7', config: { Cmd: ['true'] }, stdin: false }),
        (err: unknown) => isKind(err, 'NotFound'),
      );
    });
  });
}
