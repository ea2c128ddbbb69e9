import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeLogBatches } from '../../../../src/engine/api/streams.routes.js';
import type { LogChunk } from '../../../../src/engine/containers/io/io.types.js';
import { FrameDecoder } from '../../../../src/http/stream.js';

/** A sink that records each write and answers false (full) when told to. */
class Sink extends Writable {
  writes: Buffer[] = [];
  full = false;
  constructor() {
    super({ highWaterMark: 1 });
  }
  override write(chunk: Buffer): boolean {
    this.writes.push(Buffer.from(chunk));
    return !this.full;
  }
  get bytes(): Buffer {
    return Buffer.concat(this.writes);
  }
}

const chunk = (stream: 'stdout' | 'stderr', text: string): LogChunk => ({ stream, data: Buffer.from(text) });

describe('logs writer', () => {
  it('frames every message of a batch, in order, stdout and stderr apart', async () => {
    const sink = new Sink();
    async function* batches() {
      yield [chunk('stdout', 'a\n'), chunk('stderr', 'b\n')];
      yield [chunk('stdout', ''), chunk('stdout', 'c\n')];
    }
    await writeLogBatches(sink, batches(), false);
    const frames = new FrameDecoder().push(sink.bytes);
    assert.deepEqual(
      frames.map((f) => [f.stream, f.payload.toString()]),
      [
        [1, 'a\n'],
        [2, 'b\n'],
        [1, ''],
        [1, 'c\n'],
      ],
    );
  });

  it('sends TTY output as it is', async () => {
    const sink = new Sink();
    async function* batches() {
      yield [chunk('stdout', 'x'), chunk('stdout', 'y\n')];
    }
    await writeLogBatches(sink, batches(), true);
    assert.equal(sink.bytes.toString(), 'xy\n');
  });

  it('sends a small batch at once while the reader waits for more (follow)', async () => {
    const sink = new Sink();
    let release: () => void = () => undefined;
    const more = new Promise<void>((r) => {
      release = r;
    });
    async function* batches() {
      yield [chunk('stdout', 'first\n')];
      await more;
      yield [chunk('stdout', 'second\n')];
    }
    const done = writeLogBatches(sink, batches(), true);
    await sleep(20);
    assert.equal(sink.bytes.toString(), 'first\n');
    release();
    await done;
    assert.equal(sink.bytes.toString(), 'first\nsecond\n');
  });

  it('waits for drain when the socket is full', async () => {
    const sink = new Sink();
    sink.full = true;
    const big = 'z'.repeat(100 * 1024);
    let pulled = 0;
    async function* batches() {
      for (let i = 0; i < 3; i++) {
        pulled++;
        yield [chunk('stdout', big)];
      }
    }
    const done = writeLogBatches(sink, batches(), true);
    await sleep(20);
    assert.equal(pulled, 1, 'no more is read while the first write waits');
    assert.equal(sink.writes.length, 1);
    sink.full = false;
    sink.emit('drain');
    await done;
    assert.equal(pulled, 3);
    assert.equal(sink.bytes.length, 3 * big.length);
  });
});
