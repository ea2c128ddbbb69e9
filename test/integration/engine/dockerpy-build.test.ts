import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { requireTool, runCommand } from '../../helpers/process.js';
import { tarOf } from '../../helpers/tar-builder.js';

/**
 * docker-py (Debian's python3-docker 5.0.3) builds against berth: the scenarios of docker-py's
 * own build integration tests (tests/integration/api_build_test.py of 5.0.3), written again in
 * test/fixtures/dockerpy/build_scenarios.py with local images and a loopback URL for ADD.
 */

const SCRIPT = join(import.meta.dirname, '../../fixtures/dockerpy/build_scenarios.py');

const SCENARIOS = [
  'proxy_env',
  'proxy_env_and_buildargs',
  'streaming',
  'dockerignore',
  'buildargs',
  'shmsize_isolation_labels',
  'cache_from',
  'target',
  'network_mode',
  'extra_hosts',
  'squash',
  'stderr_data',
  'gzip_context_and_empty_ignore_lines',
  'invalid_platform',
  'dockerfile_places',
  'prune_builds',
];

describe('docker-py build scenarios', () => {
  let engine: TestEngine;
  let server: Server;
  let url: string;

  before(async () => {
    requireTool('python3', "Debian's python3-docker is needed (scripts/install-deps.sh)");
    engine = await TestEngine.start({ args: ['--experimental'] });
    await ensureBusybox(engine);
    const archive = gzipSync(tarOf([{ name: 'silence.txt', data: 'shh' }]));
    server = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/gzip', 'Content-Length': archive.length });
      res.end(archive);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/silence.tar.gz`;
  });

  after(async () => {
    await new Promise((r) => server?.close(r));
    await engine?.destroy();
  });

  for (const scenario of SCENARIOS) {
    it(scenario, async () => {
      const r = await runCommand('python3', [SCRIPT, engine.host, scenario], {
        env: { BUILD_URL: url },
        timeoutMs: 180_000,
      });
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    });
  }
});
