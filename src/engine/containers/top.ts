import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { invalidParameter } from '../../common/errors.js';
import type { TopResult } from './types.js';

const run = promisify(execFile);

/**
 * `docker top`: run the host's `ps` with the given arguments and keep the rows of the
 * container's processes, as dockerd does.
 */
export async function runTop(pids: number[], psArgs = '-ef'): Promise<TopResult> {
  const args = psArgs.trim() === '' ? [] : psArgs.trim().split(/\s+/);
  let stdout: string;
  try {
    ({ stdout } = await run('ps', args, { maxBuffer: 64 * 1024 * 1024 }));
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    const first = (e.stderr || e.message).trim().split('\n')[0] ?? '';
    throw invalidParameter(`ps: ${first}`);
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
