import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { appendFile, mkdtemp, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  dockerTime,
  type LogMessage,
  LogRotationWatcher,
  monitorLogSizeMax,
  parseLogLimits,
  parseRecord,
  parseSize,
  readLogs,
  rotateLog,
  rotateLogIfNeeded,
} from '../../../../src/engine/runtime/logs/index.js';
import { findTail } from '../../../../src/engine/runtime/logs/tail.js';

const execFileP = promisify(execFile);
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-logs-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

let seq = 0;
/** A record as conmon writes it, at second `sec` of a fixed day. */
function rec(sec: number, stream: 'stdout' | 'stderr', tag: 'P' | 'F', text: string, nsec = 0): string {
  const t = new Date(Date.UTC(2024, 0, 2, 3, 4, 0) + sec * 1000).toISOString().slice(0, 19);
  return `${t}.${String(nsec).padStart(9, '0')}+00:00 ${stream} ${tag} ${text}\n`;
}

async function logFile(content: string): Promise<string> {
  const p = join(dir, `c${++seq}.log`);
  await writeFile(p, content);
  return p;
}

async function all(path: string, opts: Partial<Parameters<typeof readLogs>[1]> = {}): Promise<LogMessage[]> {
  const out: LogMessage[] = [];
  for await (const m of readLogs(path, { stdout: true, stderr: true, ...opts })) out.push(m);
  return out;
}

const texts = (ms: LogMessage[]) => ms.map((m) => m.line.toString());

describe('k8s-file records', () => {
  it('parses F and P records', () => {
    const f = parseRecord(Buffer.from(rec(0, 'stdout', 'F', 'hello')))!;
    assert.equal(f.stream, 'stdout');
    assert.equal(f.partial, false);
    assert.equal(f.data.toString(), 'hello\n');
    assert.equal(f.ts, '2024-01-02T03:04:00.000000000+00:00');
    const p = parseRecord(Buffer.from(rec(0, 'stderr', 'P', 'part')))!;
    assert.equal(p.stream, 'stderr');
    assert.equal(p.partial, true);
    assert.equal(p.data.toString(), 'part');
    assert.equal(parseRecord(Buffer.from('garbage\n')), null);
    assert.equal(parseRecord(Buffer.from('2024-01-02T03:04:00.000000000+00:00 stdin F x\n')), null);
  });

  it('formats times as docker does (UTC, trailing zeros dropped)', () => {
    assert.equal(dockerTime('2024-01-02T03:04:05.123450000+00:00'), '2024-01-02T03:04:05.12345Z');
    assert.equal(dockerTime('2024-01-02T03:04:05.000000000+00:00'), '2024-01-02T03:04:05Z');
    assert.equal(dockerTime('2024-01-02T05:04:05.000000001+02:00'), '2024-01-02T03:04:05.000000001Z');
  });
});

describe('readLogs', () => {
  it('reads messages in order with streams and times', async () => {
    const p = await logFile(
      rec(0, 'stdout', 'F', 'one') + rec(1, 'stderr', 'F', 'two') + rec(2, 'stdout', 'F', ''),
    );
    const ms = await all(p);
    assert.deepEqual(texts(ms), ['one\n', 'two\n', '\n']);
    assert.deepEqual(
      ms.map((m) => m.stream),
      ['stdout', 'stderr', 'stdout'],
    );
    assert.equal(ms[1]!.time, '2024-01-02T03:04:01Z');
  });

  it('joins partial records into one message, per stream', async () => {
    const p = await logFile(
      rec(0, 'stdout', 'P', 'hel') +
        rec(0, 'stderr', 'F', 'err') +
        rec(1, 'stdout', 'P', 'lo ') +
        rec(2, 'stdout', 'F', 'world'),
    );
    const ms = await all(p);
    assert.deepEqual(texts(ms), ['err\n', 'hello world\n']);
    assert.equal(ms[1]!.time, '2024-01-02T03:04:00Z', 'a joined message has the time of its first part');
  });

  it('ends with an unfinished line as it is, and skips a torn record', async () => {
    const p = await logFile(
      `${rec(0, 'stdout', 'F', 'a')}${rec(1, 'stdout', 'P', 'prompt> ')}2024-01-02T03:0`,
    );
    assert.deepEqual(texts(await all(p)), ['a\n', 'prompt> ']);
  });

  it('keeps a TTY line ending (CRLF) and joins a line split across a rotation', async () => {
    const p = join(dir, 'tty.log');
    await writeFile(`${p}.1`, rec(0, 'stdout', 'F', 'prompt\r') + rec(1, 'stdout', 'P', 'long '));
    await writeFile(p, rec(2, 'stdout', 'F', 'line\r'));
    assert.deepEqual(texts(await all(p)), ['prompt\r\n', 'long line\r\n']);
    assert.deepEqual(texts(await all(p, { tail: 1 })), ['long line\r\n']);
  });

  it('filters streams', async () => {
    const p = await logFile(rec(0, 'stdout', 'F', 'out') + rec(1, 'stderr', 'F', 'err'));
    assert.deepEqual(texts(await all(p, { stderr: false })), ['out\n']);
    assert.deepEqual(texts(await all(p, { stdout: false })), ['err\n']);
    assert.deepEqual(texts(await all(p, { stdout: false, stderr: false })), []);
  });

  it('filters by since and until (unix nanoseconds, inclusive)', async () => {
    const p = await logFile(
      rec(0, 'stdout', 'F', 'a') + rec(1, 'stdout', 'F', 'b', 500) + rec(2, 'stdout', 'F', 'c'),
    );
    const base = Date.UTC(2024, 0, 2, 3, 4, 0) * 1e6;
    assert.deepEqual(texts(await all(p, { since: base + 1e9 })), ['b\n', 'c\n']);
    assert.deepEqual(texts(await all(p, { since: base + 1e9 + 501 })), ['c\n']);
    assert.deepEqual(texts(await all(p, { until: base + 1e9 + 500 })), ['a\n', 'b\n']);
  });

  it('tails the last N messages (partials count once, both streams count)', async () => {
    const p = await logFile(
      rec(0, 'stdout', 'F', '1') +
        rec(1, 'stderr', 'F', '2') +
        rec(2, 'stdout', 'P', '3a') +
        rec(2, 'stdout', 'P', '3b') +
        rec(3, 'stdout', 'F', '3c') +
        rec(4, 'stdout', 'F', '4'),
    );
    assert.deepEqual(texts(await all(p, { tail: 1 })), ['4\n']);
    assert.deepEqual(texts(await all(p, { tail: 2 })), ['3a3b3c\n', '4\n']);
    assert.deepEqual(texts(await all(p, { tail: 3 })), ['2\n', '3a3b3c\n', '4\n']);
    assert.deepEqual(texts(await all(p, { tail: 3, stderr: false })), ['3a3b3c\n', '4\n']);
    assert.equal((await all(p, { tail: 100 })).length, 4);
    assert.deepEqual(texts(await all(p, { tail: 0 })), []);
    assert.equal((await all(p, { tail: -1 })).length, 4);
  });

  it('tails across rotated files and reads them oldest first', async () => {
    const p = join(dir, 'rot.log');
    await writeFile(`${p}.2`, rec(0, 'stdout', 'F', 'old1') + rec(1, 'stdout', 'F', 'old2'));
    await writeFile(`${p}.1`, rec(2, 'stdout', 'F', 'mid'));
    await writeFile(p, rec(3, 'stdout', 'F', 'new'));
    assert.deepEqual(texts(await all(p)), ['old1\n', 'old2\n', 'mid\n', 'new\n']);
    assert.deepEqual(texts(await all(p, { tail: 3 })), ['old2\n', 'mid\n', 'new\n']);
    const pos = await findTail([`${p}.2`, `${p}.1`, p], 3);
    assert.deepEqual(pos, { file: 0, offset: rec(0, 'stdout', 'F', 'old1').length });
  });

  it('tails a large file reading only its end', async () => {
    const p = join(dir, 'big.log');
    const line = rec(0, 'stdout', 'F', 'x'.repeat(200));
    const handle = await open(p, 'w');
    const block = line.repeat(5000);
    for (let i = 0; i < 64; i++) await handle.write(block);
    await handle.write(rec(9, 'stdout', 'F', 'last'));
    await handle.close();
    const t0 = performance.now();
    const ms = await all(p, { tail: 10 });
    const took = performance.now() - t0;
    assert.equal(ms.length, 10);
    assert.equal(ms[9]!.line.toString(), 'last\n');
    assert.ok(took < 200, `tail of a ${64 * block.length} byte log took ${took} ms`);
  });

  it('reads 64 MiB of log at more than 150 MiB/s', async () => {
    // Measured in a child process: inside a test, node:test's async context tracking slows every
    // promise several times over, which is not what the engine sees.
    const p = join(dir, 'perf.log');
    const line = rec(0, 'stdout', 'F', 'y'.repeat(120));
    const block = line.repeat(Math.ceil((1 << 20) / line.length));
    const handle = await open(p, 'w');
    for (let i = 0; i < 64; i++) await handle.write(block);
    await handle.close();
    const bytes = 64 * block.length;
    const module = join(import.meta.dirname, '../../../../src/engine/runtime/logs/index.ts');
    const script = `
      const { readLogs } = await import(${JSON.stringify(module)});
      let best = 0, n = 0, size = 0;
      for (let round = 0; round < 3; round++) {
        n = 0; size = 0;
        const t0 = performance.now();
        for await (const m of readLogs(${JSON.stringify(p)}, { stdout: true, stderr: true })) { n++; size += m.line.length; }
        best = Math.max(best, ${bytes} / 1048576 / ((performance.now() - t0) / 1000));
      }
      console.log(JSON.stringify({ n, size, rate: best }));`;
    const { stdout } = await execFileP(process.execPath, [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      script,
    ]);
    const { n, size, rate } = JSON.parse(stdout) as { n: number; size: number; rate: number };
    assert.equal(n, 64 * (block.length / line.length));
    assert.equal(size, n * 121);
    assert.ok(rate > 150, `read at ${rate.toFixed(0)} MiB/s`);
  });

  it('follows appends, a rotation with reopen, and stops after draining', async () => {
    const p = join(dir, 'follow.log');
    await writeFile(p, rec(0, 'stdout', 'F', 'first'));
    const signal = new AbortController();
    const stop = new AbortController();
    const got: string[] = [];
    const reader = (async () => {
      for await (const m of readLogs(p, {
        follow: true,
        stdout: true,
        stderr: true,
        signal: signal.signal,
        stopFollowing: stop.signal,
      })) {
        got.push(m.line.toString());
      }
    })();
    const waitFor = async (n: number) => {
      for (let i = 0; i < 200 && got.length < n; i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(got.length >= n, `got ${JSON.stringify(got)}`);
    };
    await waitFor(1);
    await appendFile(p, rec(1, 'stdout', 'F', 'second'));
    await waitFor(2);
    // rotation: the writer keeps writing to the renamed file until it reopens
    assert.equal(await rotateLog(p, 3), true);
    await appendFile(`${p}.1`, rec(2, 'stdout', 'F', 'third'));
    await writeFile(p, rec(3, 'stdout', 'F', 'fourth'));
    await waitFor(4);
    await appendFile(p, rec(4, 'stderr', 'F', 'fifth'));
    stop.abort();
    await reader;
    assert.deepEqual(got, ['first\n', 'second\n', 'third\n', 'fourth\n', 'fifth\n']);
    signal.abort();
  });

  it('follow with tail 0 shows only new messages; abort ends at once', async () => {
    const p = await logFile(rec(0, 'stdout', 'F', 'old'));
    const ac = new AbortController();
    const got: string[] = [];
    const reader = (async () => {
      for await (const m of readLogs(p, {
        follow: true,
        tail: 0,
        stdout: true,
        stderr: true,
        signal: ac.signal,
      })) {
        got.push(m.line.toString());
        if (got.length === 1) ac.abort();
      }
    })();
    await new Promise((r) => setTimeout(r, 50));
    await appendFile(p, rec(1, 'stdout', 'F', 'new'));
    await reader;
    assert.deepEqual(got, ['new\n']);
  });
});

describe('log rotation', () => {
  it('shifts files and drops the oldest', async () => {
    const p = join(dir, 'r.log');
    await writeFile(p, 'c');
    await writeFile(`${p}.1`, 'b');
    await writeFile(`${p}.2`, 'a');
    assert.equal(await rotateLog(p, 3), true);
    assert.equal(await readFile(`${p}.1`, 'utf8'), 'c');
    assert.equal(await readFile(`${p}.2`, 'utf8'), 'b');
    await assert.rejects(readFile(p), { code: 'ENOENT' });
  });

  it('empties the log when only one file is kept', async () => {
    const p = join(dir, 'one.log');
    await writeFile(p, 'data');
    assert.equal(await rotateLog(p, 1), false);
    assert.equal(await readFile(p, 'utf8'), '');
  });

  it('rotates at max-size and asks for a reopen', async () => {
    const p = join(dir, 'size.log');
    await writeFile(p, 'x'.repeat(100));
    let reopened = 0;
    const reopen = async () => {
      reopened++;
      await writeFile(p, '');
    };
    assert.equal(await rotateLogIfNeeded(p, { maxSize: 200, maxFiles: 2 }, reopen), false);
    await appendFile(p, 'y'.repeat(100));
    assert.equal(await rotateLogIfNeeded(p, { maxSize: 200, maxFiles: 2 }, reopen), true);
    assert.equal(reopened, 1);
    assert.equal((await readFile(`${p}.1`)).length, 200);
    await rename(`${p}.1`, `${p}.old`);
  });

  it('watches a log and rotates it when it reaches max-size', async () => {
    const p = join(dir, 'watched.log');
    await writeFile(p, '');
    let reopened = 0;
    const errors: unknown[] = [];
    const w = new LogRotationWatcher(
      p,
      { maxSize: 1000, maxFiles: 3 },
      async () => {
        reopened++;
        await writeFile(p, '');
      },
      (err) => errors.push(err),
    ).start();
    try {
      await appendFile(p, 'x'.repeat(600));
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(reopened, 0);
      await appendFile(p, 'x'.repeat(600));
      for (let i = 0; i < 100 && reopened === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(reopened, 1);
      assert.equal((await readFile(`${p}.1`)).length, 1200);
      assert.deepEqual(errors, []);
    } finally {
      w.close();
    }
  });

  it('parses max-size and max-file as dockerd', () => {
    assert.equal(parseSize('10m'), 10 * 1024 * 1024);
    assert.equal(parseSize('1k'), 1024);
    assert.equal(parseSize('100'), 100);
    assert.equal(parseSize('1.5g'), 1.5 * 1024 ** 3);
    assert.deepEqual(parseLogLimits({ Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '3' } }), {
      maxSize: 1048576,
      maxFiles: 3,
    });
    assert.deepEqual(parseLogLimits(undefined), { maxSize: -1, maxFiles: 1 });
    assert.throws(() => parseLogLimits({ Config: { 'max-file': '3' } }), /max-size/);
    assert.throws(() => parseLogLimits({ Config: { 'max-size': 'lots' } }), /invalid size/);
    assert.equal(monitorLogSizeMax({ maxSize: 100, maxFiles: 3 }), 300);
    assert.equal(monitorLogSizeMax({ maxSize: -1, maxFiles: 1 }), undefined);
  });
});
