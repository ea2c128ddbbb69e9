import { writeFile } from 'node:fs/promises';
import { type EngineOptions, TestEngine } from '../../helpers/engine.js';
import { knownFor } from '../known.js';
import { type FuzzTarget, type RunOptions, type RunReport, runFuzz } from '../lib/runner.js';
import { EngineFuzzer } from './generate.js';
import { engineRoutes } from './routes.js';
import { EngineWorld } from './world.js';

export interface FuzzEngine {
  engine: TestEngine;
  target: FuzzTarget;
  fuzzer: EngineFuzzer;
}

/**
 * A fresh engine for fuzzing (TestEngine: its own socket, data root, exec root and bridge under
 * a temp dir) with the fixtures (world.ts); `stop` removes every container and destroys it.
 */
export async function startFuzzEngine(
  opts: EngineOptions = {},
): Promise<FuzzEngine & { stop(): Promise<void> }> {
  const engine = await TestEngine.start(opts);
  try {
    const world = new EngineWorld(engine);
    await world.setup();
    const fuzzer = new EngineFuzzer(await engineRoutes(), world);
    const pid = engine.pid;
    let logMark = 0;
    const target: FuzzTarget = {
      name: 'engine',
      connect: { path: engine.socket },
      exited() {
        if (pid === undefined) return 'never started';
        try {
          process.kill(pid, 0);
          return undefined;
        } catch {
          return `the engine process (pid ${pid}) is gone`;
        }
      },
      logTail: () => engine.log().slice(-6000),
      mark() {
        logMark = engine.log().length;
      },
      async check() {
        const ping = await engine.request('GET', '/_ping', { timeoutMs: 30_000 }).catch((e: Error) => e);
        if (ping instanceof Error || ping.status !== 200)
          return `the engine does not answer /_ping after the run: ${ping instanceof Error ? ping.message : ping.status}`;
        const unhandled = engine
          .log()
          .slice(logMark)
          .split('\n')
          .filter((l) => /unhandled|uncaught/i.test(l));
        return unhandled.length
          ? `the engine logged unhandled errors:\n${unhandled.slice(0, 10).join('\n')}`
          : undefined;
      },
    };
    return { engine, target, fuzzer, stop: () => cleanUp(engine, target) };
  } catch (err) {
    await engine.destroy();
    throw err;
  }
}

/** Remove every container, each on its own (one that will not go must not keep the others). */
async function removeAll(engine: TestEngine): Promise<boolean> {
  const ids = (await engine.docker(['ps', '-aq'], { timeoutMs: 30_000 })).stdout.split('\n').filter(Boolean);
  let all = true;
  for (const id of ids) {
    const r = await engine.docker(['rm', '-f', id], { timeoutMs: 8000 });
    if (r.code !== 0 && !/No such container/.test(r.stderr)) all = false;
  }
  return all;
}

/**
 * Leave nothing behind, whatever the run did to the engine: one that ended is started again
 * (it finds its containers again) so that its containers can be removed; one that cannot remove
 * a container (a request left it locked) is restarted first. Then TestEngine.destroy.
 */
async function cleanUp(engine: TestEngine, target: FuzzTarget): Promise<void> {
  try {
    if (target.exited()) await engine.launch();
    if (!(await removeAll(engine))) {
      await engine.restart();
      await removeAll(engine);
    }
  } catch {
    // destroy does what it can
  }
  await engine.destroy();
}

/** A whole run against a fresh engine, destroyed at the end with every container the run made. */
/** `logFile`: where the server's whole log is written at the end (for a look at what it said). */
export async function runEngineFuzz(opts: RunOptions & { logFile?: string }): Promise<RunReport> {
  const f = await startFuzzEngine();
  try {
    return await runFuzz(f.target, f.fuzzer, { known: knownFor('engine'), ...opts });
  } finally {
    if (opts.logFile) await writeFile(opts.logFile, f.engine.log());
    await f.stop();
  }
}
