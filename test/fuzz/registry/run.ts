import { writeFile } from 'node:fs/promises';
import { knownFor } from '../known.js';
import { type FuzzTarget, type RunOptions, type RunReport, runFuzz } from '../lib/runner.js';
import { RegistryFuzzer, registryRoutes } from './generate.js';
import { type RegistryProcess, startRegistryProcess } from './process.js';
import { RegistryWorld } from './world.js';

export interface FuzzRegistry {
  registry: RegistryProcess;
  target: FuzzTarget;
  fuzzer: RegistryFuzzer;
  stop(): Promise<void>;
}

/** A fresh registry process for fuzzing (process.ts) with the fixtures (world.ts). */
export async function startFuzzRegistry(): Promise<FuzzRegistry> {
  const registry = await startRegistryProcess();
  try {
    const world = new RegistryWorld(registry.url);
    await world.setup();
    const fuzzer = new RegistryFuzzer(registryRoutes(), world);
    let logMark = 0;
    const target: FuzzTarget = {
      name: 'registry',
      connect: { host: '127.0.0.1', port: registry.port },
      exited: () => registry.exited(),
      logTail: () => registry.logTail(),
      mark() {
        logMark = registry.log().length;
      },
      async check() {
        const r = await fetch(`${registry.url}/v2/`).catch((e: Error) => e);
        if (r instanceof Error || r.status !== 401)
          return `the registry does not answer /v2/ after the run: ${r instanceof Error ? r.message : r.status}`;
        const unhandled = registry
          .log()
          .slice(logMark)
          .split('\n')
          .filter((l) => /unhandled|uncaught/i.test(l));
        return unhandled.length
          ? `the registry logged unhandled errors:\n${unhandled.slice(0, 10).join('\n')}`
          : undefined;
      },
    };
    return { registry, target, fuzzer, stop: () => registry.stop() };
  } catch (err) {
    await registry.stop();
    throw err;
  }
}

/** A whole run against a fresh registry, stopped and its root removed at the end. */
/** `logFile`: where the server's whole log is written at the end (for a look at what it said). */
export async function runRegistryFuzz(opts: RunOptions & { logFile?: string }): Promise<RunReport> {
  const f = await startFuzzRegistry();
  try {
    return await runFuzz(f.target, f.fuzzer, { known: knownFor('registry'), ...opts });
  } finally {
    if (opts.logFile) await writeFile(opts.logFile, f.registry.log());
    await f.stop();
  }
}
