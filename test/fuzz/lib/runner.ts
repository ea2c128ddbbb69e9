import { mkdir, writeFile } from 'node:fs/promises';
import type { NetConnectOpts } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KnownDefect } from '../known.js';
import { type ExchangeResult, exchange } from './exchange.js';
import type { ParsedResponse } from './response-parser.js';
import { Rng } from './rng.js';
import { type Deliberate, judge, showBytes } from './verdict.js';
import type { WireRequest } from './wire.js';

/**
 * The loop both fuzzers share: request i is drawn from its own generator (seed, i), sent on a
 * fresh connection, judged (lib/verdict.ts), and the server checked to be alive. Requests go one
 * at a time, so that a seed and a count replay the same run.
 */

export interface FuzzTarget {
  name: string;
  connect: NetConnectOpts;
  /** undefined while the server runs; else how it ended. */
  exited(): string | undefined;
  /** The end of the server's log, for the report. */
  logTail(): string;
  /** Marks where the run begins in the server's log (check reads what was logged after). */
  mark?(): void;
  /** After the run: is the server still well (answers, logged no unhandled error)? The reason if not. */
  check?(): Promise<string | undefined>;
}

export interface Fuzzer {
  generate(rng: Rng, index: number): WireRequest;
  /** Learn from an answer (IDs, upload locations) for later requests. */
  observe?(req: WireRequest, result: ExchangeResult): void;
  /** Housekeeping before request `index` (fixtures back, leftovers removed); at fixed indices. */
  maintain?(index: number): Promise<void>;
  deliberate: Deliberate;
  /** Requests left out because they would hit a known defect (known.ts), by defect. */
  avoided?: Map<string, number>;
}

export interface RunOptions {
  seed: number;
  count: number;
  timeoutMs: number;
  /** Stop after this many failures (default 10). */
  maxFailures?: number;
  /** Print each request's label and status. */
  verbose?: boolean;
  /** Where the bytes of failing requests are written (default a temp dir). */
  failureDir?: string;
  out?: (line: string) => void;
  /** Known defects of others' code (known.ts): left out or counted, not failed... */
  known?: KnownDefect[];
  /** ...unless this is set: then they are sent and fail as any other. */
  strictKnown?: boolean;
  /** Stops the run (Ctrl-C): the requests so far are reported, the server cleaned up. */
  signal?: AbortSignal;
}

export interface Failure {
  index: number;
  label: string;
  reason: string;
  request: string;
  requestFile: string;
  answer: string;
}

export interface RunReport {
  target: string;
  seed: number;
  count: number;
  sent: number;
  elapsedMs: number;
  failures: Failure[];
  /** The server ended (fatal: the run stops). */
  serverExit?: string;
  statuses: Map<number, number>;
  /** Requests sent a second time (see runFuzz). */
  resent: number;
  avoided: Map<string, number>;
  /** Failures that are known defects (known.ts), by defect. */
  knownHits: Map<string, number>;
}

export async function runFuzz(target: FuzzTarget, fuzzer: Fuzzer, opts: RunOptions): Promise<RunReport> {
  const out = opts.out ?? ((line: string) => process.stderr.write(`${line}\n`));
  const maxFailures = opts.maxFailures ?? 10;
  const failureDir = opts.failureDir ?? join(tmpdir(), `berth-fuzz-${target.name}-${opts.seed}`);
  const report: RunReport = {
    target: target.name,
    seed: opts.seed,
    count: opts.count,
    sent: 0,
    elapsedMs: 0,
    failures: [],
    statuses: new Map(),
    resent: 0,
    avoided: fuzzer.avoided ?? new Map(),
    knownHits: new Map(),
  };
  const known = opts.strictKnown ? [] : (opts.known ?? []);
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  const started = Date.now();
  target.mark?.();
  for (let i = 0; i < opts.count; i++) {
    if (opts.signal?.aborted) {
      out(`interrupted before request #${i}`);
      break;
    }
    await fuzzer.maintain?.(i);
    const req = fuzzer.generate(new Rng(opts.seed, i), i);
    const avoid = known.find((k) => k.avoid?.(req));
    if (avoid) {
      count(report.avoided, `known ${avoid.id}`);
      continue;
    }
    let result = await exchange(target.connect, req, opts.timeoutMs);
    // the server closed while the request was still going out and no answer was read: node's
    // socket loses an early answer (431, 413) when its next write fails, so send it again slowly
    if (result.unsent && result.responses.length === 0 && !target.exited()) {
      report.resent++;
      result = await exchange(target.connect, req, opts.timeoutMs, 10);
    }
    report.sent++;
    for (const r of result.responses) report.statuses.set(r.status, (report.statuses.get(r.status) ?? 0) + 1);
    fuzzer.observe?.(req, result);
    const last = result.responses.at(-1);
    if (opts.verbose) {
      const said =
        last && last.status >= 400
          ? ` ${last.body.subarray(0, 160).toString('utf8').replace(/\s+/g, ' ')}`
          : '';
      const line = req.data.subarray(0, 300).toString('latin1').split('\r\n')[0];
      out(
        `#${i} ${req.label} -> ${last ? last.status : (result.socketError ?? 'closed')} (${result.elapsedMs} ms)${said}\n    ${JSON.stringify(line)}`,
      );
    }
    // let the server's exit show before judging: a request that killed it is the culprit
    if (!target.exited() && (result.closed || result.timedOut)) await new Promise((r) => setTimeout(r, 20));
    const exit = target.exited();
    let reason = exit ? `the server ended: ${exit}` : judge(req, result, fuzzer.deliberate);
    const hit = reason && !exit ? known.find((k) => k.symptom?.(reason as string, req, result)) : undefined;
    if (hit) {
      count(report.knownHits, hit.id);
      if (opts.verbose) out(`#${i} known defect ${hit.id}: ${reason}`);
      reason = undefined;
    }
    if (reason) {
      await mkdir(failureDir, { recursive: true });
      const requestFile = join(failureDir, `request-${i}.bin`);
      await writeFile(requestFile, req.data);
      const failure: Failure = {
        index: i,
        label: req.label,
        reason,
        request: showBytes(req.data),
        requestFile,
        answer: showBytes(result.received, 1500),
      };
      report.failures.push(failure);
      out(formatFailure(target.name, opts, failure));
      if (exit) {
        report.serverExit = exit;
        out(`--- server log (end) ---\n${target.logTail()}`);
        break;
      }
      if (report.failures.length >= maxFailures) {
        out(`stopping after ${maxFailures} failures`);
        break;
      }
    }
  }
  if (!report.serverExit) {
    const why = target.exited() ?? (await target.check?.());
    if (why) {
      report.failures.push({
        index: -1,
        label: '(after the run)',
        reason: why,
        request: '',
        requestFile: '',
        answer: '',
      });
      out(`FAIL ${target.name} after the run: ${why}\n--- server log (end) ---\n${target.logTail()}`);
    }
  }
  report.elapsedMs = Date.now() - started;
  return report;
}

/**
 * Send one fixed request (a corpus case) and judge it as a run judges its requests; `expect` adds
 * the case's own check. The reason it fails, or undefined.
 */
export async function checkOne(
  target: FuzzTarget,
  fuzzer: Pick<Fuzzer, 'deliberate'>,
  req: WireRequest,
  timeoutMs: number,
  expect?: (res: ParsedResponse | undefined) => string | undefined,
): Promise<string | undefined> {
  const result = await exchange(target.connect, req, timeoutMs);
  if (!target.exited() && (result.closed || result.timedOut)) await new Promise((r) => setTimeout(r, 50));
  const exit = target.exited();
  if (exit) return `the server ended: ${exit}\n${target.logTail()}`;
  const why = judge(req, result, fuzzer.deliberate);
  if (why) return `${why}\nanswer: ${showBytes(result.received, 1500)}`;
  const final = result.responses.find((r) => r.status >= 200);
  return expect?.(final);
}

export function formatFailure(name: string, opts: { seed: number }, f: Failure): string {
  if (f.index < 0) return `FAIL ${name} after the run (seed ${opts.seed}): ${f.reason}`;
  return [
    `FAIL ${name} request #${f.index} (replay: --seed ${opts.seed} --count ${f.index + 1})`,
    `  route: ${f.label}`,
    `  why: ${f.reason}`,
    `  request bytes: ${f.request}`,
    `  (all of them in ${f.requestFile})`,
    `  answer: ${f.answer}`,
  ].join('\n');
}

export function summary(r: RunReport): string {
  const statuses = [...r.statuses.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}:${n}`)
    .join(' ');
  const avoided = [...r.avoided.entries()].map(([k, n]) => `${k}:${n}`).join(' ');
  const known = [...r.knownHits.entries()].map(([k, n]) => `${k}:${n}`).join(' ');
  return [
    `${r.target} fuzz: seed ${r.seed}, ${r.sent}/${r.count} requests in ${(r.elapsedMs / 1000).toFixed(1)} s, ${r.failures.length} failure(s)${r.serverExit ? ', SERVER EXITED' : ''}`,
    `  statuses: ${statuses}${r.resent ? ` (${r.resent} sent twice after a close mid-request)` : ''}`,
    ...(avoided ? [`  left out (unsafe bodies, known defects): ${avoided}`] : []),
    ...(known ? [`  known defects seen (not failed; known.ts): ${known}`] : []),
  ].join('\n');
}

export interface CliOptions {
  seed: number;
  count: number;
  timeoutMs: number;
  verbose: boolean;
  maxFailures: number;
  /** Send the requests of known defects too (known.ts). */
  known: boolean;
  /** Write the server's whole log there at the end. */
  logFile?: string;
}

/** Ctrl-C or SIGTERM stop a run between two requests (so the server is cleaned up). */
export function interruptible(): AbortSignal {
  const ac = new AbortController();
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => {
      process.stderr.write(`${sig}: stopping after this request\n`);
      ac.abort();
    });
  return ac.signal;
}

/** `--seed S --count N [--timeout MS] [--max-failures K] [--verbose] [--known] [--log FILE]`. */
export function parseCli(argv: string[], defaults: { count: number }): CliOptions {
  const opts: CliOptions = {
    seed: Math.floor(Math.random() * 2 ** 31),
    count: defaults.count,
    timeoutMs: 15_000,
    verbose: false,
    maxFailures: 10,
    known: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${a} takes a non-negative integer`);
      return v;
    };
    if (a === '--seed') opts.seed = next();
    else if (a === '--count') opts.count = next();
    else if (a === '--timeout') opts.timeoutMs = next();
    else if (a === '--max-failures') opts.maxFailures = next();
    else if (a === '--verbose' || a === '-v') opts.verbose = true;
    else if (a === '--known') opts.known = true;
    else if (a === '--log') opts.logFile = argv[++i];
    else if (a === '--help' || a === '-h') {
      process.stdout.write(
        'usage: node --import tsx test/fuzz/<engine|registry>.fuzz.ts [--seed S] [--count N] [--timeout MS] [--max-failures K] [--known] [--verbose] [--log FILE]\n',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}
