import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { runCommand } from '../../helpers/process.js';

const repoRoot = resolve(import.meta.dirname, '../../..');

/**
 * One engine per exec root and per data root, by a lock that dies with its holder: an engine
 * killed with SIGKILL blocks nothing (while still a zombie too), nor does a pid file naming a
 * process that is no engine; a live engine blocks a second one on either of its roots.
 */

/** The state letter of a process (`Z` for a zombie), '' once it is gone. */
async function processState(pid: number): Promise<string> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

describe('the engine lock', () => {
  let engine: TestEngine;
  let spare: string;
  const running: ChildProcess[] = [];

  before(async () => {
    engine = await TestEngine.start({ bridge: 'none' });
    spare = await mkdtemp(join(tmpdir(), 'berth-lock-'));
  });
  after(async () => {
    for (const c of running) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await engine?.destroy();
    await rm(spare, { recursive: true, force: true });
  });

  /** A second engine with some of the first one's roots: it must refuse, naming the first. */
  async function assertRefused(overrides: Record<string, string>): Promise<void> {
    const r = await runCommand(process.execPath, engine.commandLine(overrides), { timeoutMs: 30_000 });
    assert.notEqual(r.code, 0, `a second engine started:\n${r.stdout}${r.stderr}`);
    assert.match(
      `${r.stdout}${r.stderr}`,
      new RegExp(`another berth engine \\(pid ${engine.pid}\\) is running`),
    );
    assert.equal((await engine.request('GET', '/_ping')).status, 200, 'the first engine still serves');
  }

  it('a live engine blocks a second one on its exec root, and on its data root', async () => {
    await assertRefused({
      '--host': `unix://${join(spare, 'a.sock')}`,
      '--data-root': join(spare, 'data-a'),
    });
    await assertRefused({
      '--host': `unix://${join(spare, 'b.sock')}`,
      '--exec-root': join(spare, 'exec-b'),
    });
  });

  it('a pid file naming a live process that is no engine blocks nothing', async () => {
    await engine.stop();
    // this test's own process: alive, and no engine
    await writeFile(join(engine.execRoot, 'berth.pid'), `${process.pid}\n`);
    await engine.launch();
    assert.equal((await readFile(join(engine.execRoot, 'berth.pid'), 'utf8')).trim(), String(engine.pid));
  });

  it('an engine killed with SIGKILL blocks nothing, while it is still a zombie too', async () => {
    await engine.stop();
    // the engine's parent never reaps it: `sh` starts it in the background and becomes `sleep`
    const parent = spawn(
      'sh',
      [
        '-c',
        '"$@" >/dev/null 2>&1 & echo $!; exec sleep 120',
        'sh',
        process.execPath,
        ...engine.commandLine(),
      ],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'ignore'] },
    );
    running.push(parent);
    let out = '';
    parent.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    await eventually('the engine pid', () => /^\d+\n/.test(out), 10_000);
    const pid = Number(out.trim());
    await eventually(
      'the unreaped engine to answer',
      async () => (await engine.request('GET', '/_ping').catch(() => undefined))?.status === 200,
      30_000,
      50,
    );
    process.kill(pid, 'SIGKILL');
    await eventually(
      'the killed engine to be a zombie',
      async () => (await processState(pid)) === 'Z',
      10_000,
    );
    await engine.launch();
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
    assert.equal(await processState(pid), 'Z', 'the old engine was a zombie all along');
    parent.kill('SIGKILL');
  });
});
