import { spawn } from 'node:child_process';
import { errnoCode } from '../../../common/errors.js';

/** The host tools a build context needs besides Node: git, for a `remote` that is a repository. */
export interface ContextHost {
  /**
   * Run git with `args` in `cwd`; resolves with its status and standard error (undefined status
   * when git is not installed). `signal` kills it.
   */
  git(
    args: string[],
    cwd: string,
    signal: AbortSignal,
  ): Promise<{ code: number | undefined; stderr: string }>;
}

export const hostContextTools: ContextHost = {
  git(args, cwd, signal) {
    return new Promise((resolve, reject) => {
      const child = spawn('git', args, {
        cwd,
        stdio: ['ignore', 'ignore', 'pipe'],
        signal,
        killSignal: 'SIGKILL',
        // never a prompt for credentials: a build has no terminal
        env: {
          ...process.env,
          GIT_TERMINAL_PROMPT: '0',
          GIT_ASKPASS: 'true',
          GIT_SSH_COMMAND: 'ssh -oBatchMode=yes',
        },
      });
      const err: Buffer[] = [];
      let size = 0;
      child.stderr.on('data', (d: Buffer) => {
        if (size < 64 * 1024) err.push(d);
        size += d.length;
      });
      child.on('error', (e) => {
        if (errnoCode(e) === 'ENOENT') resolve({ code: undefined, stderr: '' });
        else reject(e);
      });
      child.on('close', (code) =>
        resolve({ code: code ?? 128, stderr: Buffer.concat(err).toString('utf8') }),
      );
    });
  },
};
