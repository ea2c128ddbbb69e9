import { type ChildProcess, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import { requireTool, tempDir, waitForHttp } from './registry.js';

export { freePort };

export interface ReferenceRegistry {
  url: string;
  hostPort: string;
  root: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Start Debian's reference registry (docker-registry, distribution 2.8) on a loopback port with
 * its own config and root (HTTP Basic from a bcrypt htpasswd file when `htpasswd` is given,
 * Bearer tokens of an external token server with `token`);
 * stopped by its PID.
 */
export async function startReferenceRegistry(
  root: string,
  opts: {
    htpasswd?: string;
    /** Token auth (auth.token) with an external token server. */
    token?: { realm: string; service: string; issuer: string; rootcertbundle: string };
    /** More top-level config.yml lines (a `notifications:` section). */
    extraConfig?: string[];
  } = {},
): Promise<ReferenceRegistry> {
  requireTool('docker-registry', "Debian's docker-registry package is needed (scripts/install-deps.sh)");
  const port = await freePort();
  const dir = await tempDir('berth-refcfg-');
  const config = join(dir, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${root}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      ...(opts.htpasswd
        ? ['auth:', '  htpasswd:', '    realm: basic-realm', `    path: ${opts.htpasswd}`]
        : []),
      ...(opts.token
        ? [
            'auth:',
            '  token:',
            `    realm: ${opts.token.realm}`,
            `    service: ${opts.token.service}`,
            `    issuer: ${opts.token.issuer}`,
            `    rootcertbundle: ${opts.token.rootcertbundle}`,
          ]
        : []),
      ...(opts.extraConfig ?? []),
      '',
    ].join('\n'),
  );
  const child = spawn('docker-registry', ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/v2/`, 10_000);
  } catch (err) {
    if (child.pid) process.kill(child.pid, 'SIGKILL');
    throw new Error(`reference registry did not start: ${err} ${stderr}`);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url,
    hostPort: `127.0.0.1:${port}`,
    root,
    child,
    async stop() {
      if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(() => {
        if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
      }, 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
