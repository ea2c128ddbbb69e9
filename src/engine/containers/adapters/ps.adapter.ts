import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { ProcessTable } from '../core/top.js';

const run = promisify(execFile);

/** The host's `ps` (docker top). */
export const hostProcessTable: ProcessTable = {
  async ps(args) {
    try {
      return (await run('ps', args, { maxBuffer: 64 * 1024 * 1024 })).stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error((e.stderr || e.message).trim().split('\n')[0] ?? '');
    }
  },
};
