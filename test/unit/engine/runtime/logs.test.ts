import assert from 'node:assert/strict';
import { appendFile, mkdtemp, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LogFileSet } from '../../../../src/engine/runtime/logs/files.js';
import {
  compressLog,
  dockerTime,
  JsonEntryEncoder,
  type LogMessage,
  MONITOR_LOG_FLOOR,
  monitorLogSizeMax,
  parseLogLimits,
  parseRecord,
  parseSize,
  readLogs,
  rotateFiles,
} from '../../../../src/engine/runtime/logs/index.js';
import { findTail } from '../../../../src/engine/runtime/logs/tail.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-logs-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

let seq = 0;
/** A json-file entry at second `sec` (+ nsec) of a fixed day. */
function entry(sec: number, stream: 'stdout' | 'stderr', text: string, nsec = 0): string {
  const enc = new JsonEntryEncoder();
  const t = new Date(Date.UTC(2024, 0, 2, 3, 4, 0) + sec * 1000).toISOString().slice(0, 19);
  const time = dockerTime(`${t}.${String(nsec).padStart(9, '0')}+00:00`);
  enc.add(stream, Buffer.from(time), Buffer.from(text));
  return enc.take().toString();
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

describe('k8s-file records (the monitor output)', () => {
  it('parses F and P records and formats times as docker does', () => {
    const f = parseRecord(Buffer.from('2024-01-02T03:04:00.000000000+00:00 stdout F hello\n'))!;
    assert.equal(f.stream, 'stdout');
    assert.equal(f.partial, false);
    assert.equal(f.data.toString(), 'hello\n');
    assert.equal(parseRecord(Buffer.from('garbage\n')), null);
    assert.equal(dockerTime('2024-01-02T03:04:05.123450000+00:00'), '2024-01-02T03:04:05.12345Z');
    assert.equal(dockerTime('2024-01-02T03:04:05.000000000+00:00'), '2024-01-02T03:04:05Z');
    assert.equal(dockerTime('2024-01-02T05:04:05.000000001+02:00'), '2024-01-02T03:04:05.000000001Z');
  });
});

describe('readLogs (json-file)', () => {
  it('reads entries in order with streams, times and attributes', async () => {
    const enc = new JsonEntryEncoder({ team: 'a' });
    enc.add('stdout', Buffer.from('2024-01-02T03:04:09.5Z'), Buffer.from('with attrs\n'));
    const p = await logFile(
      entry(0, 'stdout', 'one\n') +
        entry(1, 'stderr', 'two\n') +
        entry(2, 'stdout', '\n') +
        enc.take().toString(),
    );
    const ms = await all(p);
    assert.deepEqual(texts(ms), ['one\n', 'two\n', '\n', 'with attrs\n']);
    assert.deepEqual(
      ms.map((m) => m.stream),
      ['stdout', 'stderr', 'stdout', 'stdout'],
    );
    assert.equal(ms[1]!.time, '2024-01-02T03:04:01Z');
    assert.equal(ms[0]!.attrs, undefined);
    assert.deepEqual(ms[3]!.attrs, { team: 'a' });
    assert.equal(ms[3]!.time, '2024-01-02T03:04:09.5Z');
  });

  it('gives partial entries as they are, skips undecodable lines and a torn last line', async () => {
    const p = await logFile(
      `${entry(0, 'stdout', 'hel')}${entry(0, 'stdout', 'lo\n')}not json\n${entry(1, 'stdout', 'prompt> ')}{"log":"to`,
    );
    assert.deepEqual(texts(await all(p)), ['hel', 'lo\n', 'prompt> ']);
    assert.deepEqual(texts(await all(p, { tail: 1 })), ['prompt> ']);
  });

  it('filters streams', async () => {
    const p = await logFile(entry(0, 'stdout', 'out\n') + entry(1, 'stderr', 'err\n'));
    assert.deepEqual(texts(await all(p, { stderr: false })), ['out\n']);
    assert.deepEqual(texts(await all(p, { stdout: false })), ['err\n']);
    assert.deepEqual(texts(await all(p, { stdout: false, stderr: false })), []);
  });

  it('filters by since and until (unix nanoseconds, inclusive)', async () => {
    const p = await logFile(
      entry(0, 'stdout', 'a\n') + entry(1, 'stdout', 'b\n', 500) + entry(2, 'stdout', 'c\n'),
    );
    const base = Date.UTC(2024, 0, 2, 3, 4, 0) * 1e6;
    assert.deepEqual(texts(await all(p, { since: base + 1e9 })), ['b\n', 'c\n']);
    assert.deepEqual(texts(await all(p, { since: base + 1e9 + 501 })), ['c\n']);
    assert.deepEqual(texts(await all(p, { until: base + 1e9 + 500 })), ['a\n', 'b\n']);
  });

  it('tails the last N entries (both streams count, before filtering)', async () => {
    const p = await logFile(
      entry(0, 'stdout', '1\n') +
        entry(1, 'stderr', '2\n') +
        entry(2, 'stdout', '3a') +
        entry(2, 'stdout', '3b\n') +
        entry(4, 'stdout', '4\n'),
    );
    assert.deepEqual(texts(await all(p, { tail: 1 })), ['4\n']);
    assert.deepEqual(texts(await all(p, { tail: 2 })), ['3b\n', '4\n']);
    assert.deepEqual(texts(await all(p, { tail: 4 })), ['2\n', '3a', '3b\n', '4\n']);
    assert.deepEqual(texts(await all(p, { tail: 4, stdout: false })), ['2\n']);
    assert.equal((await all(p, { tail: 100 })).length, 5);
    assert.deepEqual(texts(await all(p, { tail: 0 })), []);
    assert.equal((await all(p, { tail: -1 })).length, 5);
  });

  it('tails across rotated and compressed files and reads them oldest first', async () => {
    const p = join(dir, 'rot.log');
    await writeFile(`${p}.3`, entry(0, 'stdout', 'old1\n') + entry(1, 'stdout', 'old2\n'));
    await compressLog(`${p}.3`);
    await writeFile(`${p}.2`, entry(1, 'stdout', 'older\n'));
    await compressLog(`${p}.2`);
    await writeFile(`${p}.1`, entry(2, 'stdout', 'mid\n'));
    await writeFile(p, entry(3, 'stdout', 'new\n'));
    assert.deepEqual(texts(await all(p)), ['old1\n', 'old2\n', 'older\n', 'mid\n', 'new\n']);
    assert.deepEqual(texts(await all(p, { tail: 4 })), ['old2\n', 'older\n', 'mid\n', 'new\n']);
    const files = await LogFileSet.of(p);
    try {
      assert.deepEqual(
        files.files.map((f) => f.path.slice(p.length)),
        ['.3.gz', '.2.gz', '.1', ''],
      );
      assert.deepEqual(await findTail(files, 4), { file: 0, offset: entry(0, 'stdout', 'old1\n').length });
      assert.deepEqual(await findTail(files, 3), { file: 1, offset: 0 });
    } finally {
      await files.close();
    }
    // the decompressed copies are gone
    const left = (await import('node:fs/promises')).readdir(dir);
    assert.deepEqual(
      (await left).filter((n) => n.includes('.read')),
      [],
    );
  });

  it('tails a large file reading only its end', async () => {
    // 64 GiB of hole before the last entries: reading from the start would
    // never finish within the test's time, reading backwards from the end
    // finds the ten lines in the last block.
    const p = join(dir, 'big.log');
    const line = entry(0, 'stdout', `${'x'.repeat(200)}\n`);
    const handle = await open(p, 'w');
    await handle.write(line.repeat(20), 64 * 2 ** 30);
    await handle.write(entry(9, 'stdout', 'last\n'), 64 * 2 ** 30 + line.length * 20);
    await handle.close();
    const ms = await all(p, { tail: 10 });
    assert.equal(ms.length, 10);
    assert.equal(ms[9]!.line.toString(), 'last\n');
    assert.equal(ms[0]!.line.toString(), `${'x'.repeat(200)}\n`);
    await rm(p);
  });

  it('reads a large log whole: every entry, every byte', async () => {
    // Throughput is measured by bench/engine (logs read), not here.
    const p = join(dir, 'large.log');
    const line = entry(0, 'stdout', `${'y'.repeat(120)}\n`, 123456789);
    const block = line.repeat(Math.ceil((1 << 20) / line.length));
    const handle = await open(p, 'w');
    for (let i = 0; i < 8; i++) await handle.write(block);
    await handle.close();
    let n = 0;
    let size = 0;
    for await (const m of readLogs(p, { stdout: true, stderr: true })) {
      n++;
      size += m.line.length;
    }
    assert.equal(n, 8 * (block.length / line.length));
    assert.equal(size, n * 121);
    await rm(p);
  });

  it('follows appends and a rotation (the old file read to its end first), stops after draining', async () => {
    const p = join(dir, 'follow.log');
    await writeFile(p, entry(0, 'stdout', 'first\n'));
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
    await appendFile(p, entry(1, 'stdout', 'second\n'));
    await waitFor(2);
    // the writer's last entries of a file, then the rotation, in one go
    await appendFile(p, entry(2, 'stdout', 'third\n'));
    await rotateFiles(p, 3);
    await writeFile(p, entry(3, 'stdout', 'fourth\n'));
    await waitFor(4);
    // max-file 1: the log is replaced
    await rotateFiles(p, 1);
    await writeFile(p, entry(4, 'stderr', 'fifth\n'));
    await waitFor(5);
    await appendFile(p, entry(5, 'stderr', 'sixth\n'));
    stop.abort();
    await reader;
    assert.deepEqual(got, ['first\n', 'second\n', 'third\n', 'fourth\n', 'fifth\n', 'sixth\n']);
    signal.abort();
  });

  it('follow with tail 0 shows only new entries; abort ends at once', async () => {
    const p = await logFile(entry(0, 'stdout', 'old\n'));
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
    await appendFile(p, entry(1, 'stdout', 'new\n'));
    await reader;
    assert.deepEqual(got, ['new\n']);
  });
});

describe('log limits and rotation', () => {
  it('shifts files, drops the oldest, moves compressed ones along', async () => {
    const p = join(dir, 'r.log');
    await writeFile(p, 'd');
    await writeFile(`${p}.1`, 'c');
    await writeFile(`${p}.2.gz`, 'b');
    await writeFile(`${p}.3.gz`, 'a');
    await rotateFiles(p, 4);
    assert.equal(await readFile(`${p}.1`, 'utf8'), 'd');
    assert.equal(await readFile(`${p}.2`, 'utf8'), 'c');
    assert.equal(await readFile(`${p}.3.gz`, 'utf8'), 'b');
    await assert.rejects(readFile(p), { code: 'ENOENT' });
    await assert.rejects(readFile(`${p}.4.gz`), { code: 'ENOENT' });
    // max-file 1: the log goes, nothing is kept
    await writeFile(p, 'x');
    await rename(`${p}.1`, `${p}.keep`);
    await rotateFiles(p, 1);
    await assert.rejects(readFile(p), { code: 'ENOENT' });
    await assert.rejects(readFile(`${p}.1`), { code: 'ENOENT' });
  });

  it('parses sizes: json-file in decimal units, local in binary ones', () => {
    assert.equal(parseSize('10m', 1000), 10_000_000);
    assert.equal(parseSize('1k'), 1024);
    assert.equal(parseSize('1KiB', 1000), 1000);
    assert.equal(parseSize('100'), 100);
    assert.equal(parseSize('1.5g'), 1.5 * 1024 ** 3);
    assert.equal(parseSize('2 kb', 1000), 2000);
    assert.throws(() => parseSize('lots'), /invalid size: 'lots'/);
    assert.throws(() => parseSize('-1'), /invalid size: '-1'/);
  });

  it('parses LogConfig as dockerd’s drivers do', () => {
    assert.deepEqual(parseLogLimits({ Type: 'json-file', Config: { 'max-size': '1k', 'max-file': '3' } }), {
      maxSize: 1000,
      maxFiles: 3,
      compress: false,
    });
    assert.deepEqual(parseLogLimits(undefined), { maxSize: -1, maxFiles: 1, compress: false });
    // max-file without max-size means nothing (dockerd accepts it)
    assert.deepEqual(parseLogLimits({ Config: { 'max-file': '3' } }), {
      maxSize: -1,
      maxFiles: 3,
      compress: false,
    });
    assert.deepEqual(parseLogLimits({ Type: 'local', Config: {} }), {
      maxSize: 20 * 1024 * 1024,
      maxFiles: 5,
      compress: true,
    });
    assert.deepEqual(parseLogLimits({ Type: 'local', Config: { 'max-size': '1k' } }).maxSize, 1024);
    assert.throws(() => parseLogLimits({ Config: { 'max-size': 'lots' } }), /invalid size: 'lots'/);
    assert.throws(
      () => parseLogLimits({ Config: { 'max-size': '0' } }),
      /max-size must be a positive number/,
    );
    assert.throws(() => parseLogLimits({ Config: { 'max-file': '0' } }), /max-file cannot be less than 1/);
    assert.throws(() => parseLogLimits({ Config: { 'max-file': 'x' } }), /invalid max-file: x/);
    assert.throws(() => parseLogLimits({ Config: { compress: 'maybe' } }), /ParseBool/);
    assert.throws(
      () => parseLogLimits({ Config: { 'max-size': '1m', compress: 'true' } }),
      /compress cannot be true when max-file is less than 2 or max-size is not set/,
    );
    assert.deepEqual(parseLogLimits({ Config: { 'max-size': '1m', 'max-file': '2', compress: 'T' } }), {
      maxSize: 1_000_000,
      maxFiles: 2,
      compress: true,
    });
    assert.throws(
      () => parseLogLimits({ Type: 'local', Config: { 'max-file': '1' } }),
      /compression cannot be enabled when max file count is 1/,
    );
  });

  it('gives the monitor a cap for when the engine is down (never below the floor)', () => {
    assert.equal(monitorLogSizeMax({ maxSize: 100, maxFiles: 3, compress: false }), MONITOR_LOG_FLOOR);
    assert.equal(monitorLogSizeMax({ maxSize: 100e6, maxFiles: 3, compress: false }), 300e6);
    assert.equal(monitorLogSizeMax({ maxSize: -1, maxFiles: 1, compress: false }), undefined);
  });
});
