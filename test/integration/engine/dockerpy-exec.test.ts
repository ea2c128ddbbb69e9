import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { requireTool, runCommand } from '../../helpers/process.js';

/**
 * docker-py (Debian's python3-docker 5.0.3) exec against berth: the scenarios of docker-py's own
 * exec integration tests (tests/integration/api_exec_test.py of 5.0.3), written again in
 * test/fixtures/dockerpy/exec_scenarios.py, plus a missing command and megabytes both ways.
 */

const SCRIPT = join(import.meta.dirname, '../../fixtures/dockerpy/exec_scenarios.py');

const SCENARIOS = [
  'execute_command',
  'exec_command_string',
  'exec_command_as_user',
  'exec_command_streaming',
  'exec_start_socket',
  'exec_start_detached',
  'exec_inspect',
  'exec_command_with_env',
  'exec_command_with_workdir',
  'exec_demux',
  'exec_missing_command',
  'exec_large_output_and_stdin',
];

describe('docker-py exec scenarios', () => {
  let engine: TestEngine;

  before(async () => {
    requireTool('python3', "Debian's python3-docker is needed (scripts/install-deps.sh)");
    engine = await TestEngine.start({ bridge: 'none' });
    await ensureBusybox(engine);
  });

  after(async () => {
    await engine?.destroy();
  });

  for (const scenario of SCENARIOS) {
    it(scenario, async () => {
      const r = await runCommand('python3', [SCRIPT, engine.host, scenario], { timeoutMs: 120_000 });
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    });
  }
});
