/**
 * The registry fuzzer, by hand: `node --import tsx test/fuzz/registry.fuzz.ts --seed 42 --count 20000`
 * (a registry in a child process on loopback). Exits 1 if any request failed (docs/testing.md).
 */
import { interruptible, parseCli, summary } from './lib/runner.js';
import { runRegistryFuzz } from './registry/run.js';

const cli = parseCli(process.argv.slice(2), { count: 3000 });
process.stderr.write(`registry fuzz: seed ${cli.seed}, ${cli.count} requests\n`);
const report = await runRegistryFuzz({
  seed: cli.seed,
  count: cli.count,
  timeoutMs: cli.timeoutMs,
  maxFailures: cli.maxFailures,
  verbose: cli.verbose,
  strictKnown: cli.known,
  signal: interruptible(),
  logFile: cli.logFile,
});
process.stderr.write(`${summary(report)}\n`);
process.exitCode = report.failures.length ? 1 : 0;
