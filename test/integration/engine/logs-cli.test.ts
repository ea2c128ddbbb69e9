import assert from 'node:assert/strict';
import { readdir, readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync } from 'node:zlib';
import { FrameDecoder } from '../../../src/http/stream.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/** A json-file entry as dockerd writes it (Go's RFC3339Nano time, UTC). */
const ENTRY =
  /^\{"log":"(?:[^"\\]|\\.)*","stream":"(?:stdout|stderr)",(?:"attrs":\{[^}]*\},)?"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d*[1-9])?Z"\}$/;

interface Entry {
  log: string;
  stream: string;
  time: string;
  attrs?: Record<string, string>;
}

async function entries(path: string): Promise<Entry[]> {
  const text = await readFile(path, 'utf8');
  assert.ok(text === '' || text.endsWith('\n'), 'whole lines');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      assert.match(l, ENTRY);
      return JSON.parse(l) as Entry;
    });
}

/** Checks that the numbered lines `<prefix><n>...` are consecutive: nothing lost, nothing twice. */
function consecutive(lines: string[], prefix: string): { first: number; last: number } {
  const nums = lines
    .filter((l) => l.startsWith(prefix))
    .map((l) => Number(/^\d+/.exec(l.slice(prefix.length))?.[0] ?? Number.NaN));
  assert.ok(nums.length > 0, 'no numbered lines');
  for (let i = 1; i < nums.length; i++) {
    assert.equal(nums[i], nums[i - 1]! + 1, `after ${nums[i - 1]} comes ${nums[i]}`);
  }
  return { first: nums[0]!, last: nums.at(-1)! };
}

/** Container logs in dockerd's json-file format, written by the engine from conmon's output. */
describe('container logs (json-file, docker CLI)', () => {
  let engine: TestEngine;
  const ok = (...args: string[]) => engine.dockerOk(args, { timeoutMs: 60_000 });

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('LogPath holds json-file entries: streams, partial last line, escaping, TTY', async () => {
    const id = await ok(
      'run',
      '-d',
      'busybox',
      'sh',
      '-c',
      'echo out; echo err >&2; printf "tab\\t<x> \\"q\\"\\n"; printf prompt',
    );
    assert.equal(await ok('wait', id), '0');
    const logPath = await ok('inspect', '-f', '{{.LogPath}}', id);
    assert.equal(logPath, `${engine.dataRoot}/containers/${id}/${id}-json.log`);
    const es = await entries(logPath);
    const text = await readFile(logPath, 'utf8');
    assert.ok(text.includes('"log":"tab\\u0009\\u003cx\\u003e \\"q\\"\\n"'), text);
    // in order within a stream (conmon reads the two pipes as they come)
    const of = (stream: string) => es.filter((e) => e.stream === stream).map((e) => e.log);
    assert.deepEqual(of('stdout'), ['out\n', 'tab\t<x> "q"\n', 'prompt']);
    assert.deepEqual(of('stderr'), ['err\n']);
    assert.equal(es.length, 4);
    const r = await engine.docker(['logs', id]);
    assert.equal(r.stdout, 'out\ntab\t<x> "q"\nprompt');
    assert.equal(r.stderr, 'err\n');
    // -t prints each entry's own time in dockerd's fixed-width form
    const stamped = (await ok('logs', '-t', id)).split('\n');
    assert.equal(stamped.length, 3);
    for (const line of stamped) {
      assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z /);
      const t = line.slice(0, 30).replace(/\.?0*Z$/, 'Z');
      assert.ok(
        es.some((e) => e.time === t),
        `${t} is an entry's time`,
      );
    }

    const tty = await ok('run', '-d', '-t', 'busybox', 'sh', '-c', 'echo tty; echo also >&2');
    await ok('wait', tty);
    assert.deepEqual(
      (await entries(await ok('inspect', '-f', '{{.LogPath}}', tty))).map((e) => [e.stream, e.log]),
      [
        ['stdout', 'tty\r\n'],
        ['stdout', 'also\r\n'],
      ],
    );
    await ok('rm', id, tty);
  });

  it('a line has the time its newline was read (dockerd stamps a message when it finds its end)', async () => {
    await ok('run', '--name', 'stamps', 'busybox', 'sh', '-c', 'printf x; sleep 1; echo y >&2; echo z');
    const r = await engine.docker(['logs', '-t', 'stamps']);
    const lines = `${r.stdout}${r.stderr}`.split('\n');
    const at = (text: string) => {
      const line = lines.find((l) => l.endsWith(` ${text}`)) ?? '';
      return Date.parse(line.split(' ')[0] ?? '');
    };
    // stdout and stderr are separate pipes, so which of y and z is read
    // first is a race; what matters is that xz is stamped about a second
    // after its first byte, next to y, not when x arrived.
    assert.ok(Math.abs(at('xz') - at('y')) < 500, lines.join('\n'));
    await ok('rm', 'stamps');
  });

  it('logs are complete once wait answers', async () => {
    for (let i = 0; i < 15; i++) {
      const id = await ok('run', '-d', 'busybox', 'echo', `hi-${i}`);
      await ok('wait', id);
      assert.equal(await ok('logs', id), `hi-${i}`);
      await ok('rm', id);
    }
    const many = await ok(
      'run',
      '-d',
      'busybox',
      'sh',
      '-c',
      'i=0; while [ $i -lt 20000 ]; do echo n$i; i=$((i+1)); done',
    );
    await ok('wait', many);
    const lines = (await ok('logs', many)).split('\n');
    assert.equal(lines.length, 20000);
    assert.deepEqual(consecutive(lines, 'n'), { first: 0, last: 19999 });
    await ok('rm', many);
  });

  it('docker logs options: --tail, --since, --until, -f, --details, one stream', async () => {
    const id = await ok(
      'run',
      '-d',
      '--label',
      'team=blue',
      '-e',
      'STAGE=test',
      '--log-opt',
      'labels=team',
      '--log-opt',
      'env=STAGE',
      'busybox',
      'sh',
      '-c',
      'echo one; echo two >&2; sleep 1.2; echo three; sleep 600',
    );
    for (let i = 0; i < 100 && !(await ok('logs', id)).includes('three'); i++) await sleep(50);
    const es = await entries(await ok('inspect', '-f', '{{.LogPath}}', id));
    assert.deepEqual(es[0]!.attrs, { STAGE: 'test', team: 'blue' });
    assert.equal(await ok('logs', '--tail', '1', id), 'three');
    // a tail that is not a number of lines means all of them (dockerd's strconv.Atoi or -1)
    for (const tail of ['abc', '1.5', '-3']) {
      const r = await engine.request('GET', `/v1.44/containers/${id}/logs?stdout=1&tail=${tail}`);
      assert.equal(r.status, 200, tail);
      assert.equal(
        new FrameDecoder()
          .push(r.body)
          .map((f) => f.payload.toString())
          .join(''),
        'one\nthree\n',
      );
    }
    assert.equal((await engine.docker(['logs', '--tail', '2', id])).stderr, 'two\n');
    const at = (log: string) => es.find((e) => e.log === log)!.time;
    // since and until are inclusive, to the nanosecond
    assert.equal(await ok('logs', '--since', at('three\n'), id), 'three');
    assert.equal(await ok('logs', '--until', at('one\n'), id), 'one');
    assert.equal(await ok('logs', '--details', '--tail', '1', id), 'STAGE=test,team=blue three');
    const outOnly = await engine.request('GET', `/v1.44/containers/${id}/logs?stdout=1`);
    // one multiplexed frame per entry: stream 1, then the length
    assert.equal(outOnly.body.toString('latin1'), '\x01\0\0\0\0\0\0\x04one\n\x01\0\0\0\0\0\0\x06three\n');
    // follow: new entries come as the container writes them; the command ends when it stops
    const f = await ok('run', '-d', 'busybox', 'sh', '-c', 'echo a; sleep 1; echo b; sleep 1; echo c');
    const follow = engine.docker(['logs', '-f', f], { timeoutMs: 20_000 });
    assert.equal((await follow).stdout, 'a\nb\nc\n');
    await ok('rm', '-f', id, f);
  });

  it('rotates by max-size (decimal units) and max-file, gzips rotated files with compress', async () => {
    const script = 'i=0; while [ $i -lt 200 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done';
    const id = await ok(
      'run',
      '-d',
      '--log-opt',
      'max-size=1k',
      '--log-opt',
      'max-file=3',
      'busybox',
      'sh',
      '-c',
      script,
    );
    await ok('wait', id);
    const logPath = await ok('inspect', '-f', '{{.LogPath}}', id);
    const names = (await readdir(dirname(logPath))).filter((n) => n.startsWith(`${id}-json.log`)).sort();
    assert.deepEqual(names, [`${id}-json.log`, `${id}-json.log.1`, `${id}-json.log.2`]);
    for (const suffix of ['.1', '.2']) {
      const es = await entries(`${logPath}${suffix}`);
      const size = (await stat(`${logPath}${suffix}`)).size;
      const lastLen = Buffer.byteLength(JSON.stringify(es.at(-1))) + 1;
      // rotated once it reached 1000 bytes (json-file reads max-size with decimal units)
      assert.ok(size >= 1000 && size - lastLen < 1000, `${suffix}: ${size} bytes`);
    }
    const lines = (await ok('logs', id)).split('\n');
    assert.equal(consecutive(lines, 'line-').last, 199);
    assert.ok(lines.length > 10 && lines.length < 60, `${lines.length} lines kept`);
    assert.equal(
      await ok('logs', '--tail', '2', id),
      'line-198-xxxxxxxxxxxxxxxxxxxx\nline-199-xxxxxxxxxxxxxxxxxxxx',
    );

    const z = await ok(
      'run',
      '-d',
      '--log-opt',
      'max-size=1k',
      '--log-opt',
      'max-file=4',
      '--log-opt',
      'compress=true',
      'busybox',
      'sh',
      '-c',
      script,
    );
    await ok('wait', z);
    const zPath = await ok('inspect', '-f', '{{.LogPath}}', z);
    let zNames: string[] = [];
    for (let i = 0; i < 100; i++) {
      zNames = (await readdir(dirname(zPath))).filter((n) => n.startsWith(`${z}-json.log`)).sort();
      if (!zNames.includes(`${z}-json.log.1`)) break;
      await sleep(50);
    }
    assert.deepEqual(zNames, [
      `${z}-json.log`,
      `${z}-json.log.1.gz`,
      `${z}-json.log.2.gz`,
      `${z}-json.log.3.gz`,
    ]);
    const inner = gunzipSync(await readFile(`${zPath}.1.gz`)).toString();
    assert.match(inner.split('\n')[0]!, ENTRY);
    const zLines = (await ok('logs', z)).split('\n');
    assert.equal(consecutive(zLines, 'line-').last, 199);
    assert.ok(zLines.length > lines.length, 'four files kept');
    await ok('rm', id, z);
  });

  it('LogConfig none: nothing written, logs answer as dockerd', async () => {
    const id = await ok('run', '-d', '--log-driver', 'none', 'busybox', 'echo', 'hi');
    await ok('wait', id);
    assert.equal(await ok('inspect', '-f', '[{{.LogPath}}] {{.HostConfig.LogConfig.Type}}', id), '[] none');
    const r = await engine.docker(['logs', id]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /configured logging driver does not support reading/);
    const files = await readdir(`${engine.dataRoot}/containers/${id}`);
    assert.deepEqual(
      files.filter((f) => f.includes('json.log')),
      [],
    );
    await ok('rm', id);
  });

  it('refuses bad log options with 400 and dockerd’s words', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--log-opt', 'max-size=abc'], /invalid size: 'abc'/],
      [['--log-opt', 'max-size=0'], /max-size must be a positive number/],
      [['--log-opt', 'max-file=0'], /max-file cannot be less than 1/],
      [
        ['--log-opt', 'compress=true'],
        /compress cannot be true when max-file is less than 2 or max-size is not set/,
      ],
      [['--log-opt', 'mode=x'], /logging mode not supported: x/],
      [['--log-opt', 'bogus=1'], /unknown log opt 'bogus' for json-file log driver/],
    ];
    for (const [opts, re] of cases) {
      const r = await engine.docker(['run', '--rm', ...opts, 'busybox', 'true']);
      assert.equal(r.code, 125, opts.join(' '));
      assert.match(r.stderr, re);
    }
  });

  it('nothing lost or written twice across kill -9 and a graceful restart of the engine', async () => {
    const id = await ok(
      'run',
      '-d',
      'busybox',
      'sh',
      '-c',
      // a stop ends the loop between lines (a SIGKILL could fall between printf and echo)
      'trap "s=1" TERM; i=0; while [ -z "$s" ]; do echo n$i; printf "part-$i "; echo end; i=$((i+1)); usleep 20000; done',
    );
    await sleep(500);
    await engine.kill9();
    // the container goes on writing while the engine is down
    await sleep(1500);
    await engine.launch();
    await sleep(500);
    await engine.restart();
    await sleep(500);
    await ok('stop', '-t', '1', id);
    const logPath = await ok('inspect', '-f', '{{.LogPath}}', id);
    const es = await entries(logPath);
    const lines = es.map((e) => e.log);
    const dump = () => JSON.stringify(lines);
    const n = consecutive(
      lines.filter((l) => l.startsWith('n')).map((l) => l.trim()),
      'n',
    );
    assert.equal(n.first, 0);
    assert.ok(n.last > 80, `only ${n.last + 1} lines`);
    // each printf part was joined with its end, none cut by the restarts
    const parts = lines.filter((l) => !l.startsWith('n'));
    assert.deepEqual(parts.slice(0, 3), ['part-0 end\n', 'part-1 end\n', 'part-2 end\n']);
    assert.equal(parts.length, n.last + 1, dump());
    assert.deepEqual(
      parts,
      parts.map((_, i) => `part-${i} end\n`),
      dump(),
    );
    assert.equal((await ok('logs', id)).split('\n').length, lines.length);
    await ok('rm', id);
  });
});
