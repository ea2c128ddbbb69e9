import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { startAll } from '../../helpers/start-all.js';

/** The same container on berth and on dockerd 20.10: their json-file logs, byte for byte. */

interface Engine {
  name: string;
  ok(args: string[]): Promise<string>;
}

/**
 * The log's lines with the time taken out, per stream (the two pipes are read as they come), long
 * runs of one character shortened. The time of an entry that goes on a partial one (a long line's
 * next part) must be the partial one's: SAME.
 */
async function shape(path: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = { stdout: [], stderr: [] };
  const last: Record<string, { time: string; partial: boolean }> = {};
  for (const line of (await readFile(path, 'utf8')).split('\n').filter(Boolean)) {
    const time = /"time":"([^"]*)"/.exec(line)?.[1] ?? '';
    assert.match(time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z$/, line);
    const stream = /"stream":"(stdout|stderr)"/.exec(line)?.[1] ?? '';
    const prev = last[stream];
    const mark = prev?.partial ? (prev.time === time ? 'SAME' : `NOT SAME ${prev.time}`) : 'T';
    last[stream] = { time, partial: !line.includes('\\n","stream"') };
    out[stream]!.push(
      line.replace(time, mark).replace(/(.)\1{15,}/g, (m, c: string) => `<${c} x ${m.length}>`),
    );
  }
  return out;
}

describe('json-file logs: berth and dockerd 20.10 write the same', () => {
  let berth: TestEngine;
  let dockerd: ReferenceDockerd;
  let engines: Engine[];

  before(async () => {
    [berth, dockerd] = await startAll([TestEngine.start(), ReferenceDockerd.start()]);
    await ensureBusybox(berth);
    await dockerd.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), 'busybox:latest']);
    engines = [
      { name: 'berth', ok: (a) => berth.dockerOk(a, { timeoutMs: 60_000 }) },
      { name: 'dockerd', ok: (a) => dockerd.dockerOk(a, { timeoutMs: 60_000 }) },
    ];
  });
  after(async () => {
    await Promise.all([berth?.destroy(), dockerd?.destroy()]);
  });

  /** Run a container to its end on both; the shapes of their logs and what `docker logs` prints. */
  async function both(
    args: string[],
    logsArgs: string[] = [],
  ): Promise<{ shapes: unknown[]; logs: string[]; paths: string[] }> {
    const shapes: unknown[] = [];
    const logs: string[] = [];
    const paths: string[] = [];
    for (const e of engines) {
      const id = await e.ok(['run', '-d', ...args]);
      await e.ok(['wait', id]);
      const path = await e.ok(['inspect', '-f', '{{.LogPath}}', id]);
      paths.push(path);
      shapes.push(await shape(path));
      logs.push(await e.ok(['logs', ...logsArgs, id]));
    }
    return { shapes, logs, paths };
  }

  it('escaping, streams, an unfinished last line, attrs and --details', async () => {
    const r = await both(
      [
        '--label',
        'team=a',
        '-e',
        'FOO=bar',
        '--log-opt',
        'labels=team,nope',
        '--log-opt',
        'env=FOO',
        'busybox',
        'sh',
        '-c',
        'printf "tab\\there <a&b> \\"q\\" back\\\\\\\\slash \\001 é \\342\\200\\250 \\377x\\n"; echo err >&2; printf "\\r\\n"; printf noeol',
      ],
      ['--details'],
    );
    assert.deepEqual(r.shapes[0], r.shapes[1]);
    assert.equal(r.logs[0], r.logs[1]);
  });

  it('long lines in 16 KiB partial entries with the first part’s time', async () => {
    const r = await both([
      'busybox',
      'sh',
      '-c',
      'head -c 20000 /dev/zero | tr "\\0" a; echo; head -c 16384 /dev/zero | tr "\\0" b; echo; head -c 40000 /dev/zero | tr "\\0" c; echo end',
    ]);
    assert.deepEqual(r.shapes[0], r.shapes[1]);
    assert.equal(r.logs[0], r.logs[1]);
  });

  it('TTY output', async () => {
    const r = await both(['-t', 'busybox', 'sh', '-c', 'echo tty; printf "a\\tb\\n"; echo e >&2']);
    assert.deepEqual(r.shapes[0], r.shapes[1]);
  });

  it('rotation files', async () => {
    const r = await both([
      '--log-opt',
      'max-size=1k',
      '--log-opt',
      'max-file=3',
      'busybox',
      'sh',
      '-c',
      'i=0; while [ $i -lt 100 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done',
    ]);
    const files = await Promise.all(
      r.paths.map(async (p) =>
        (await readdir(dirname(p)))
          .filter((n) => n.startsWith(basename(p)))
          .map((n) => n.slice(basename(p).length))
          .sort(),
      ),
    );
    assert.deepEqual(files[0], files[1]);
    assert.deepEqual(files[0], ['', '.1', '.2']);
    // the time strings' lengths vary, so a file may end one entry sooner or later
    const kept = r.logs.map((l) => l.split('\n').length);
    assert.ok(Math.abs(kept[0]! - kept[1]!) <= 3, `${kept}`);
    assert.equal(r.logs[0]!.split('\n').at(-1), r.logs[1]!.split('\n').at(-1));
  });
});
