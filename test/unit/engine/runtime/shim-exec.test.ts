import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ExecShim } from '../../../../src/engine/runtime/driver/process.js';
import { ShimExecAttach } from '../../../../src/engine/runtime/driver/shim-exec.js';

/** A shim whose pipes the test drives. */
class FakeShim implements ExecShim {
  readonly listeners = new Map<number, (chunk: Buffer | null) => void>();
  readonly stdin: string[] = [];
  stdinClosed = false;
  closed = false;
  started = Promise.resolve(1);
  exit = Promise.resolve({ code: 0 });
  onOutput(fd: 1 | 2, l: (chunk: Buffer | null) => void): void {
    this.listeners.set(fd, l);
  }
  async writeStdin(data: Buffer): Promise<void> {
    await new Promise((r) => setImmediate(r));
    this.stdin.push(data.toString());
  }
  closeStdin(): void {
    this.stdinClosed = true;
  }
  close(): void {
    this.closed = true;
  }
  out(fd: 1 | 2, text: string | null): void {
    this.listeners.get(fd)?.(text === null ? null : Buffer.from(text));
  }
}

function record(conn: ShimExecAttach): { events: string[] } {
  const r = { events: [] as string[] };
  conn.on('stdout', (b: Buffer) => r.events.push(`out:${b}`));
  conn.on('stderr', (b: Buffer) => r.events.push(`err:${b}`));
  conn.on('close', () => r.events.push('close'));
  return r;
}

describe('exec session pipes (ShimExecAttach)', () => {
  it('holds output until the runtime reported the start, then gives it in order; closes after exit and EOF', () => {
    const conn = new ShimExecAttach();
    const r = record(conn);
    const shim = new FakeShim();
    conn.bind(shim);
    shim.out(1, 'a');
    shim.out(2, 'b');
    assert.deepEqual(r.events, []);
    conn.started();
    shim.out(1, 'c');
    shim.out(1, null);
    conn.exited();
    assert.deepEqual(r.events, ['out:a', 'err:b', 'out:c']);
    shim.out(2, null);
    assert.deepEqual(r.events, ['out:a', 'err:b', 'out:c', 'close']);
    assert.ok(shim.closed);
  });

  it('drops what was written when the runtime failed (its own error message is the answer)', () => {
    const conn = new ShimExecAttach();
    const r = record(conn);
    const shim = new FakeShim();
    conn.bind(shim);
    shim.out(2, 'executable file `x` not found in $PATH');
    conn.failed();
    assert.deepEqual(r.events, ['close']);
    assert.ok(shim.closed);
  });

  it('closes a while after the exit when the output does not end (a child holds the pipes)', async () => {
    const conn = new ShimExecAttach(30);
    const r = record(conn);
    const shim = new FakeShim();
    conn.bind(shim);
    conn.started();
    shim.out(1, 'x');
    conn.exited();
    assert.deepEqual(r.events, ['out:x']);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.deepEqual(r.events, ['out:x', 'close']);
    assert.ok(shim.closed);
  });

  it('writes stdin in order, written before the process is there too, and closes it after the writes', async () => {
    const conn = new ShimExecAttach();
    const shim = new FakeShim();
    conn.writeStdin(Buffer.from('1'));
    conn.bind(shim);
    conn.writeStdin(Buffer.from('2'));
    conn.closeStdin();
    conn.writeStdin(Buffer.from('ignored'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(shim.stdin, ['1', '2']);
    assert.ok(shim.stdinClosed);
  });

  it('detaches on close(): stdin closes, no more output, the pipes stay until the process ended', async () => {
    const conn = new ShimExecAttach();
    const r = record(conn);
    const shim = new FakeShim();
    conn.bind(shim);
    conn.started();
    conn.close();
    shim.out(1, 'late');
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(r.events, ['close']);
    assert.ok(shim.stdinClosed);
    assert.equal(shim.closed, false);
    shim.out(1, null);
    shim.out(2, null);
    conn.exited();
    assert.ok(shim.closed);
    assert.deepEqual(r.events, ['close']);
  });
});
