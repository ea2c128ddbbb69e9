/**
 * The engine fuzzer, by hand: `node --import tsx test/fuzz/engine.fuzz.ts --seed 42 --count 20000`
 * (as root: it starts a real engine). Exits 1 if any request failed (docs/testing.md).
 */
import { runEngineFuzz } from './engine/run.js';
import { interruptible, parseCli, summary } from './lib/runner.js';

const cli = parseCli(process.argv.slice(2), { count: 2000 });
process.stderr.write(`engine fuzz: seed ${cli.seed}, ${cli.count} requests\n`);
const report = await runEngineFuzz({
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
