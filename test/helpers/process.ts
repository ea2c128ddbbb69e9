import { spawn, spawnSync } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string | Buffer;
  timeoutMs?: number;
  /** Added to (and overriding) the test process's environment. */
  env?: Record<string, string>;
}

/** Run a command with a bounded time (SIGKILL after it); never rejects. */
export function runCommand(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout: '', stderr: String(e) });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        code: code ?? -1,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8') + (signal ? `\n(killed by ${signal})` : ''),
      });
    });
    child.stdin.on('error', () => undefined);
    if (opts.input !== undefined) child.stdin.end(opts.input);
    else child.stdin.end();
  });
}

/** Fail (not skip) with a clear message when a tool a test needs is missing. */
export function requireTool(tool: string, hint: string): void {
  const r = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${tool} is not installed: ${hint}`);
}

/** The command line of a node running `script` (TypeScript, an ES module, through tsx) with `args`. */
export function nodeScript(script: string, ...args: string[]): string[] {
  return [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script, ...args];
}
