import assert from 'node:assert/strict';
import {
  appendFile,
  link,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import {
  JsonEntryEncoder,
  LogCopier,
  type LogCopierOptions,
  type LogMessage,
  MAX_MESSAGE,
  RecordAssembler,
  readLogs,
} from '../../../../src/engine/runtime/logs/index.js';
import { eventually } from '../../../helpers/eventually.js';

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'berth-copier-'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A record as conmon writes it, at nanosecond `ns` of a fixed second. */
function rec(stream: 'stdout' | 'stderr', tag: 'P' | 'F', text: string, ns = 0): string {
  return `2026-11-21T10:00:00.${String(ns).padStart(9, '0')}+00:00 ${stream} ${tag} ${text}\n`;
}

/** The json-file time of rec(..., ns). */
function time(ns: number): string {
  const frac = String(ns).padStart(9, '0').replace(/0+$/, '');
  return `2026-11-21T10:00:00${frac ? `.${frac}` : ''}Z`;
}

interface Entry {
  log: string;
  stream: string;
  time: string;
}

function entries(text: string): Entry[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Entry);
}

function assembled(records: string[], flush = false): Entry[] {
  const enc = new JsonEntryEncoder();
  const asm = new RecordAssembler(enc);
  for (const r of records) asm.push(Buffer.from(r));
  if (flush) asm.flush();
  return entries(enc.take().toString());
}

describe('RecordAssembler (conmon records -> dockerd copier messages)', () => {
  it('joins records cut at read boundaries into lines, with the time their newline was read', () => {
    assert.deepEqual(
      assembled([
        rec('stdout', 'P', 'hel', 1),
        rec('stderr', 'F', 'err', 2),
        rec('stdout', 'P', 'lo ', 3),
        rec('stdout', 'F', 'world', 4),
        rec('stdout', 'F', '', 5),
      ]),
      [
        { log: 'err\n', stream: 'stderr', time: time(2) },
        { log: 'hello world\n', stream: 'stdout', time: time(4) },
        { log: '\n', stream: 'stdout', time: time(5) },
      ],
    );
  });

  it('cuts long lines in 16 KiB partial entries as dockerd (all with the time the first 16 KiB were complete)', () => {
    const a = 'a'.repeat(8000);
    // 20000 bytes and a newline, in conmon's 8 KiB reads
    const long = assembled([
      rec('stdout', 'P', a, 1),
      rec('stdout', 'P', a, 2),
      rec('stdout', 'F', 'a'.repeat(4000), 3),
    ]);
    assert.deepEqual(
      long.map((e) => [e.log.length, e.log.endsWith('\n'), e.time]),
      [
        [MAX_MESSAGE, false, time(3)],
        [20000 - MAX_MESSAGE + 1, true, time(3)],
      ],
    );
    // exactly 16 KiB before the newline: a full partial entry, then the newline alone
    const exact = assembled([rec('stdout', 'F', 'b'.repeat(MAX_MESSAGE), 7)]);
    assert.deepEqual(
      exact.map((e) => e.log.length),
      [MAX_MESSAGE, 1],
    );
    assert.equal(exact[1]!.log, '\n');
    // a 16 KiB part that used up what was read: the rest of the line keeps the time of that cut
    const b = 'b'.repeat(MAX_MESSAGE / 2);
    assert.deepEqual(
      assembled([
        rec('stdout', 'P', b, 1),
        rec('stdout', 'P', b, 2),
        rec('stdout', 'P', 'x', 3),
        rec('stdout', 'F', 'y', 4),
      ]).map((e) => [e.log.length, e.time]),
      [
        [MAX_MESSAGE, time(2)],
        [3, time(2)],
      ],
    );
    assert.equal(assembled([rec('stdout', 'F', 'c'.repeat(MAX_MESSAGE - 1))])[0]!.log.length, MAX_MESSAGE);
  });

  it('keeps unfinished lines until flush, then writes them as partial entries, oldest first', () => {
    const enc = new JsonEntryEncoder();
    const asm = new RecordAssembler(enc);
    asm.push(Buffer.from(rec('stderr', 'P', 'e-prompt ', 1)));
    asm.push(Buffer.from(rec('stdout', 'P', 'o-prompt ', 2)));
    assert.equal(enc.length, 0);
    assert.equal(asm.hasPending, true);
    const snap = asm.snapshot();
    assert.deepEqual(Object.keys(snap), ['stderr', 'stdout']);
    // a new assembler takes them up (a copier started after an engine restart)
    const enc2 = new JsonEntryEncoder();
    const asm2 = new RecordAssembler(enc2);
    asm2.restore(snap);
    asm2.push(Buffer.from(rec('stdout', 'P', 'more', 3)));
    asm2.flush();
    assert.deepEqual(entries(enc2.take().toString()), [
      { log: 'e-prompt ', stream: 'stderr', time: time(1) },
      { log: 'o-prompt more', stream: 'stdout', time: time(3) }, // at the end of the output: the time of its last part
    ]);
    assert.equal(asm.push(Buffer.from('not a record\n')), false);
  });
});

let n = 0;
async function setup(): Promise<{ dir: string; source: string; target: string }> {
  const dir = join(root, `c${++n}`);
  await mkdir(join(dir, 'monitor'), { recursive: true });
  return { dir, source: join(dir, 'monitor', 'output.log'), target: join(dir, 'ctr-json.log') };
}

function options(source: string, target: string, more: Partial<LogCopierOptions> = {}): LogCopierOptions {
  const errors: unknown[] = [];
  return {
    source,
    target,
    limits: { maxSize: -1, maxFiles: 1, compress: false },
    onError: (err) => errors.push(err),
    ...more,
  };
}

async function readAll(target: string): Promise<string[]> {
  const out: string[] = [];
  for await (const m of readLogs(target, { stdout: true, stderr: true })) out.push(m.line.toString());
  return out;
}

/** What conmon does on a reopen: a new empty file renamed over the path. */
async function conmonReopen(source: string): Promise<void> {
  await writeFile(`${source}.tmp`, '');
  await rename(`${source}.tmp`, source);
}

describe('LogCopier', () => {
  it('writes json-file entries as they come; a follower of the log gets them promptly', async () => {
    const { source, target } = await setup();
    await writeFile(source, rec('stdout', 'F', 'one', 1));
    const copier = await LogCopier.start(options(source, target));
    const got: LogMessage[] = [];
    const follow = new AbortController();
    const reader = (async () => {
      for await (const m of readLogs(target, {
        stdout: true,
        stderr: true,
        follow: true,
        signal: follow.signal,
      }))
        got.push(m);
    })();
    await eventually('first entry', () => got.length === 1);
    const t0 = Date.now();
    await appendFile(source, rec('stderr', 'F', 'two', 2));
    await eventually('second entry', () => got.length === 2);
    assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
    await appendFile(source, rec('stdout', 'P', 'unfinished', 3));
    await copier.finish();
    follow.abort();
    await reader;
    assert.deepEqual(entries(await readFile(target, 'utf8')), [
      { log: 'one\n', stream: 'stdout', time: time(1) },
      { log: 'two\n', stream: 'stderr', time: time(2) },
      { log: 'unfinished', stream: 'stdout', time: time(3) },
    ]);
    assert.equal(got[1]!.time, time(2));
  });

  it('rotates as json-file: before an entry once the file reached max-size; max-file files', async () => {
    const { source, target } = await setup();
    const lines = Array.from({ length: 40 }, (_, i) =>
      rec('stdout', 'F', `line-${String(i).padStart(2, '0')}`, i + 1),
    );
    await writeFile(source, lines.join(''));
    const copier = await LogCopier.start(
      options(source, target, { limits: { maxSize: 300, maxFiles: 3, compress: false } }),
    );
    await copier.finish();
    const names = (await readdir(join(target, '..'))).filter((f) => f.startsWith('ctr-json.log')).sort();
    assert.deepEqual(names, ['ctr-json.log', 'ctr-json.log.1', 'ctr-json.log.2']);
    for (const f of ['ctr-json.log.2', 'ctr-json.log.1']) {
      const text = await readFile(join(target, '..', f), 'utf8');
      const last = `${text.slice(0, -1).split('\n').at(-1)}\n`;
      assert.ok(text.length >= 300 && text.length - last.length < 300, `${f}: ${text.length} bytes`);
    }
    const kept = await readAll(target);
    assert.equal(kept.at(-1), 'line-39\n');
    // the files are consecutive: the oldest ones dropped, none in between
    const first = Number(kept[0]!.slice(5, 7));
    assert.deepEqual(
      kept,
      Array.from({ length: 40 - first }, (_, i) => `line-${String(first + i).padStart(2, '0')}\n`),
    );
  });

  it('with max-file 1 starts the log over, keeping no rotated file', async () => {
    const { source, target } = await setup();
    await writeFile(
      source,
      Array.from({ length: 10 }, (_, i) => rec('stdout', 'F', `l${i}`, i + 1)).join(''),
    );
    const copier = await LogCopier.start(
      options(source, target, { limits: { maxSize: 150, maxFiles: 1, compress: false } }),
    );
    await copier.finish();
    assert.deepEqual(
      (await readdir(join(target, '..'))).filter((f) => f.startsWith('ctr-json.log')),
      ['ctr-json.log'],
    );
    assert.deepEqual(await readAll(target), ['l9\n']);
  });

  it('compresses rotated files with dockerd’s lastTime header; reading goes through them', async () => {
    const { source, target } = await setup();
    // entries of 73 bytes: three to a file of max-size 150, six files made, four kept
    await writeFile(
      source,
      Array.from({ length: 18 }, (_, i) => rec('stdout', 'F', `z${i}`, i + 1)).join(''),
    );
    const copier = await LogCopier.start(
      options(source, target, { limits: { maxSize: 150, maxFiles: 4, compress: true } }),
    );
    await copier.finish();
    await eventually('compression', async () => {
      const names = await readdir(join(target, '..'));
      return names.includes('ctr-json.log.1.gz') && !names.includes('ctr-json.log.1');
    });
    const gz = await readFile(`${target}.1.gz`);
    assert.deepEqual([...gz.subarray(0, 4)], [0x1f, 0x8b, 0x08, 0x04]);
    const extra = gz.subarray(12, 12 + gz.readUInt16LE(10)).toString();
    const inside = entries(gunzipSync(gz).toString());
    assert.equal(extra, JSON.stringify({ lastTime: inside.at(-1)!.time }));
    assert.deepEqual(
      await readAll(target),
      Array.from({ length: 12 }, (_, i) => `z${i + 6}\n`),
    );
    assert.deepEqual((await readdir(join(target, '..'))).filter((f) => f.startsWith('ctr-json.log')).sort(), [
      'ctr-json.log',
      'ctr-json.log.1.gz',
      'ctr-json.log.2.gz',
      'ctr-json.log.3.gz',
    ]);
  });

  it('has the monitor reopen its file once read far enough, and loses nothing across reopens', async () => {
    const { source, target } = await setup();
    await writeFile(source, '');
    let reopens = 0;
    const copier = await LogCopier.start(
      options(source, target, {
        reopenAfter: 300,
        reopen: async () => {
          reopens++;
          // conmon writes on to the old file until it reopens
          await appendFile(source, rec('stdout', 'F', `before-reopen-${reopens}`));
          await conmonReopen(source);
        },
      }),
    );
    const expected: string[] = [];
    for (let i = 0; i < 30; i++) {
      await appendFile(source, rec('stdout', 'F', `l${i}-${'x'.repeat(40)}`));
      expected.push(`l${i}-${'x'.repeat(40)}\n`);
      if (i % 5 === 4)
        await eventually('copy', async () => (await readAll(target)).length >= expected.length + reopens);
    }
    await copier.finish();
    assert.ok(reopens >= 3, `${reopens} reopens`);
    const got = await readAll(target);
    assert.deepEqual(
      got.filter((l) => !l.startsWith('before-reopen')),
      expected,
    );
    assert.equal(got.filter((l) => l.startsWith('before-reopen')).length, reopens);
    assert.ok((await stat(source)).size < 300 * 3, 'the monitor file stays small');
    await assert.rejects(stat(`${source}.old`), { code: 'ENOENT' });
  });

  it('follows a file conmon replaced by itself (its size cap) after reading the old one to its end', async () => {
    const { source, target } = await setup();
    await writeFile(source, rec('stdout', 'F', 'a'));
    const copier = await LogCopier.start(options(source, target));
    await eventually('a', async () => (await readAll(target)).length === 1);
    await appendFile(source, rec('stdout', 'F', 'b'));
    await conmonReopen(source);
    await appendFile(source, rec('stdout', 'F', 'c'));
    await copier.finish();
    assert.deepEqual(await readAll(target), ['a\n', 'b\n', 'c\n']);
  });

  it('takes up after an engine stop: output written meanwhile, an unfinished line, nothing twice', async () => {
    const { source, target } = await setup();
    await writeFile(source, rec('stdout', 'F', 'one') + rec('stdout', 'P', 'half '));
    const first = await LogCopier.start(options(source, target));
    await eventually('one', async () => (await readAll(target)).length === 1);
    await first.close();
    await appendFile(source, rec('stdout', 'F', 'line') + rec('stderr', 'F', 'while down'));
    const second = await LogCopier.start(options(source, target));
    await second.finish();
    assert.deepEqual(await readAll(target), ['one\n', 'half line\n', 'while down\n']);
  });

  it('after a crash, writes again what was written after its last saved state (no duplicates)', async () => {
    const { source, target } = await setup();
    await writeFile(source, rec('stdout', 'F', 'one', 1) + rec('stdout', 'F', 'two', 2));
    const first = await LogCopier.start(options(source, target));
    await eventually('two', async () => (await readAll(target)).length === 2);
    await first.close();
    const state = await readFile(`${source}.state`, 'utf8');
    // a crash between a write and its state: the state is the one before the last write
    await appendFile(source, rec('stdout', 'F', 'three', 3));
    const again = await LogCopier.start(options(source, target));
    await eventually('three', async () => (await readAll(target)).length === 3);
    await again.close();
    const third = (await readFile(target, 'utf8')).split('\n')[2]!;
    await writeFile(`${source}.state`, state);
    await appendFile(source, rec('stdout', 'F', 'four', 4));
    const last = await LogCopier.start(options(source, target));
    await last.finish();
    assert.deepEqual(await readAll(target), ['one\n', 'two\n', 'three\n', 'four\n']);
    assert.equal((await readFile(target, 'utf8')).split('\n')[2], third);
  });

  it('after a crash during a reopen, reads the old file on from the state, then the new one', async () => {
    const { source, target } = await setup();
    await writeFile(source, rec('stdout', 'F', 'one'));
    const first = await LogCopier.start(options(source, target));
    await eventually('one', async () => (await readAll(target)).length === 1);
    await first.close();
    // the copier linked the file and asked for a reopen; conmon wrote more, then reopened
    await link(source, `${source}.old`);
    await appendFile(source, rec('stdout', 'F', 'two'));
    await conmonReopen(source);
    await appendFile(source, rec('stdout', 'F', 'three'));
    const second = await LogCopier.start(options(source, target));
    await second.finish();
    assert.deepEqual(await readAll(target), ['one\n', 'two\n', 'three\n']);
    await assert.rejects(stat(`${source}.old`), { code: 'ENOENT' });
  });

  it('finishes a container that wrote nothing (no monitor file at all)', async () => {
    const { source, target } = await setup();
    const copier = await LogCopier.start(options(source, target));
    await copier.finish();
    assert.equal((await stat(target)).size, 0);
    await assert.rejects(stat(`${source}.state`), { code: 'ENOENT' });
  });
});
