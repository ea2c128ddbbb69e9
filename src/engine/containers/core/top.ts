import { invalidParameter } from '../../../common/errors.js';

/** GET /containers/{id}/top. */
export interface TopResult {
  Titles: string[];
  Processes: string[][];
}

/** The host's process table: `ps` with the given arguments (adapters/ps.adapter.ts). */
export interface ProcessTable {
  /** ps's output; rejects with ps's first error line when it fails. */
  ps(args: string[]): Promise<string>;
}

/**
 * `docker top`: the host's `ps` with the given arguments, keeping the rows of the container's
 * processes, as dockerd does.
 */
export async function runTop(table: ProcessTable, pids: number[], psArgs = '-ef'): Promise<TopResult> {
  const args = psArgs.trim() === '' ? [] : psArgs.trim().split(/\s+/);
  let stdout: string;
  try {
    stdout = await table.ps(args);
  } catch (err) {
    throw invalidParameter(`ps: ${err instanceof Error ? err.message : String(err)}`);
  }
  return parsePsOutput(stdout, pids);
}

export function parsePsOutput(output: string, pids: number[]): TopResult {
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  const titles = (lines[0] ?? '').trim().split(/\s+/);
  const pidIndex = titles.indexOf('PID');
  if (pidIndex < 0) throw invalidParameter("Couldn't find PID field in ps output");
  const wanted = new Set(pids);
  const processes: string[][] = [];
  for (const line of lines.slice(1)) {
    const fields = line.trim().split(/\s+/);
    const pid = Number(fields[pidIndex]);
    if (!Number.isInteger(pid) || !wanted.has(pid)) continue;
    const row = fields.slice(0, titles.length - 1);
    row.push(fields.slice(titles.length - 1).join(' '));
    processes.push(row);
  }
  return { Titles: titles, Processes: processes };
}
