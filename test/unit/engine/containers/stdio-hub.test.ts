import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { type AttachConnector, Session, StdioHub } from '../../../../src/engine/containers/io/streams.js';
import type { AttachConnection } from '../../../../src/engine/runtime/runtime.types.js';

/** A runtime attach connection: records what the hub sends, emits what the test says. */
class FakeConn extends EventEmitter implements AttachConnection {
  stdin: string[] = [];
  stdinClosed = false;
  closed = false;
  writeStdin(chunk: Buffer): void {
    this.stdin.push(chunk.toString());
  }
  closeStdin(): void {
    this.stdinClosed = true;
  }
  close(): void {
    this.closed = true;
    this.emit('close');
  }
}

/** A connector that counts its calls; after hold(), opens wait for release(). */
function connector() {
  let calls = 0;
  let gate = Promise.resolve();
  let release: () => void = () => undefined;
  const conns: FakeConn[] = [];
  const open: AttachConnector = async () => {
    calls++;
    await gate;
    const c = new FakeConn();
    conns.push(c);
    return c;
  };
  return {
    open,
    conns,
    calls: () => calls,
    hold() {
      gate = new Promise((r) => {
        release = r;
      });
    },
    release: () => release(),
  };
}

function session(hub: StdioHub, stdin = false) {
  const out: string[] = [];
  const ends: string[] = [];
  const s = new Session(
    false,
    { stdin, stdout: true, stderr: true },
    { output: (stream, d) => out.push(`${stream}:${d.toString()}`), end: (r) => ends.push(r) },
    hub,
    undefined,
  );
  return { s, out, ends };
}

const hubOf = (openStdin = false, stdinOnce = false) =>
  new StdioHub({ stdinOnce: () => stdinOnce, openStdin: () => openStdin }, () => undefined);

describe('the stdio hub opens the attach connection only while somebody needs it', () => {
  it('a detached start opens nothing; the first client attached opens it once', async () => {
    const hub = hubOf();
    const k = connector();
    await hub.started(k.open);
    assert.equal(k.calls(), 0, 'nobody attached: no connection');
    const a = session(hub);
    const b = session(hub);
    hub.add(a.s);
    hub.add(b.s);
    await hub.ensureConnected();
    assert.equal(k.calls(), 1);
    k.conns[0]!.emit('stdout', Buffer.from('hi'));
    k.conns[0]!.emit('stderr', Buffer.from('oops'));
    assert.deepEqual(a.out, ['stdout:hi', 'stderr:oops']);
    assert.deepEqual(b.out, ['stdout:hi', 'stderr:oops']);
    hub.exited();
    assert.ok(k.conns[0]!.closed);
    assert.deepEqual(a.ends, ['exited']);
  });

  it('a client attached before the start is connected before the process runs', async () => {
    const hub = hubOf();
    const a = session(hub);
    hub.add(a.s);
    await hub.ensureConnected(); // not started: nothing to connect to
    const k = connector();
    await hub.started(k.open);
    assert.equal(k.calls(), 1);
    k.conns[0]!.emit('stdout', Buffer.from('first byte'));
    assert.deepEqual(a.out, ['stdout:first byte']);
  });

  it('input without a connection is held, opens it, and goes through in order', async () => {
    const hub = hubOf(true, true);
    const k = connector();
    await hub.started(k.open);
    k.hold();
    hub.stdin(Buffer.from('a'));
    hub.stdin(Buffer.from('b'));
    hub.clientInputEnded();
    assert.equal(k.calls(), 1, 'one connection for all of it');
    k.release();
    await hub.ensureConnected();
    assert.deepEqual(k.conns[0]!.stdin, ['a', 'b']);
    assert.ok(k.conns[0]!.stdinClosed, "StdinOnce: the client's end closes stdin");
  });

  // run 1's open is held past its exit; it completes before run 2 starts, or after
  for (const late of [false, true]) {
    it(`an open that completes after its run ended is closed (${late ? 'after' : 'before'} the next run starts), and the next run opens its own`, async () => {
      const hub = hubOf();
      const k = connector();
      await hub.started(k.open);
      k.hold();
      hub.add(session(hub).s);
      hub.exited();
      const settle = async () => {
        k.release();
        await new Promise((r) => setImmediate(r));
        assert.ok(k.conns[0]!.closed, "run 1's late connection closed, not taken");
      };
      if (!late) await settle();
      const b = session(hub);
      hub.add(b.s);
      const k2 = connector();
      await hub.started(k2.open);
      assert.equal(k2.calls(), 1, 'run 2 opened before it runs');
      k2.conns[0]!.emit('stdout', Buffer.from('run 2'));
      if (late) await settle();
      k2.conns[0]!.emit('stdout', Buffer.from('still'));
      assert.deepEqual(b.out, ['stdout:run 2', 'stdout:still']);
    });
  }

  it('a failed open leaves the hub ready to try again', async () => {
    const hub = hubOf();
    let fail = true;
    let calls = 0;
    await hub.started(async () => {
      calls++;
      if (fail) throw new Error('conmon gone');
      return new FakeConn();
    });
    await assert.rejects(hub.ensureConnected(), /conmon gone/);
    fail = false;
    await hub.ensureConnected();
    await hub.ensureConnected();
    assert.equal(calls, 2);
  });
});
