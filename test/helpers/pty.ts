import { spawn } from 'node:child_process';
import type { TestEngine } from './engine.js';

/**
 * Python run before a pty scenario: the docker CLI (the arguments after the engine's host and
 * DOCKER_CONFIG) forked in a pseudo-terminal (`fd`), its output gathered in `buf`;
 * `read_until(pattern)` waits for it (a timeout ends the scenario with an `error`), `pump(pattern,
 * seconds)` reads without failing, `resize(rows, cols)` sets the window size, and
 * `finish(**extra)` waits (15 s at most) for the CLI to exit, drains its last words and prints
 * the result as JSON: `status` (its exit status, None when it did not exit), `buf`, and `extra`.
 */
const PRELUDE = String.raw`
import json, os, pty, select, struct, sys, termios, fcntl, time
host, config, args = sys.argv[1], sys.argv[2], sys.argv[3:]
env = dict(os.environ, DOCKER_CONFIG=config, DOCKER_HOST='', DOCKER_CLI_HINTS='false', TERM='xterm')
pid, fd = pty.fork()
if pid == 0:
    os.execvpe('docker', ['docker', '-H', host] + args, env)
buf = b''
def resize(rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
def read_until(pat, timeout=15):
    global buf
    end = time.time() + timeout
    while pat not in buf:
        left = end - time.time()
        if left <= 0:
            raise SystemExit(json.dumps({'error': 'timeout waiting for %r' % pat, 'buf': buf.decode('latin1')}))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b''
            if not chunk:
                raise SystemExit(json.dumps({'error': 'eof waiting for %r' % pat, 'buf': buf.decode('latin1')}))
            buf += chunk
def pump(until, timeout=15):
    global buf
    end = time.time() + timeout
    while until not in buf and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                buf += os.read(fd, 4096)
            except OSError:
                return
def finish(**extra):
    global buf
    end = time.time() + 15
    status = None
    while time.time() < end:
        wpid, st = os.waitpid(pid, os.WNOHANG)
        if wpid:
            status = os.waitstatus_to_exitcode(st)
            break
        pump(b'\x00', 0.1)
    while True:
        try:
            r, _, _ = select.select([fd], [], [], 0.3)
            if not r:
                break
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    print(json.dumps(dict(extra, status=status, buf=buf.decode('latin1'))))
`;

export interface PtyResult {
  status: number | null;
  buf: string;
  error?: string;
  [extra: string]: unknown;
}

/** Run the docker CLI with `dockerArgs` in a pseudo-terminal through a Python `scenario` (see PRELUDE). */
export function runPty(engine: TestEngine, dockerArgs: string[], scenario: string): Promise<PtyResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'python3',
      ['-c', `${PRELUDE}\n${scenario}`, engine.host, engine.dockerConfig, ...dockerArgs],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as PtyResult);
      } catch {
        reject(new Error(`pty scenario failed: ${out} ${err}`));
      }
    });
  });
}
