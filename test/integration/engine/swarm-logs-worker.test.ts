import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../helpers/eventually.js';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine } from '../../helpers/swarm-netns.js';

/**
 * Service logs across hosts (issue 14 §3, §6): a global service's task on a worker in another
 * network namespace; the manager's `docker service logs` gets the worker's lines over the
 * cluster API (the subscription down the worker's assignments stream, the lines POSTed back).
 */
describe('swarm service logs from a worker in another network namespace', () => {
  let hosts: SwarmHosts;
  let m: NsEngine;
  let w: NsEngine;

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'worker']);
    [m, w] = hosts.engines as [NsEngine, NsEngine];
  });
  after(async () => {
    await hosts?.destroy();
  });

  it('merges the lines of the manager’s and the worker’s tasks, and follows the worker’s', async () => {
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'gl',
      '--mode',
      'global',
      '-e',
      'NODE={{.Node.Hostname}}',
      'busybox:latest',
      'sh',
      '-c',
      'echo hello-$NODE; exec sleep 300',
    ]);
    let logs = '';
    await eventually(
      'both nodes’ lines',
      async () => {
        const r = await m.docker(['service', 'logs', 'gl']);
        logs = r.stdout;
        return r.code === 0 && /hello-host1/.test(r.stdout) && /hello-host2/.test(r.stdout);
      },
      30_000,
      300,
    );
    assert.match(logs, /^gl\.0\.[0-9a-z]{12}@host1\s+\| hello-host1$/m);
    assert.match(logs, /^gl\.0\.[0-9a-z]{12}@host2\s+\| hello-host2$/m);

    const child = spawn('docker', ['-H', `unix://${m.socket}`, 'service', 'logs', '-f', '--raw', 'gl'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DOCKER_HOST: '' },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
    });
    try {
      await eventually('the old lines', async () => /hello-host2/.test(out), 20_000, 100);
      const container = await w.dockerOk(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=gl']);
      await w.dockerOk(['exec', container, 'sh', '-c', 'echo later-on-host2 > /proc/1/fd/1']);
      await eventually('the worker’s new line', async () => out.includes('later-on-host2\n'), 20_000, 100);
    } finally {
      child.kill('SIGTERM');
    }
    await new Promise((r) => child.once('close', r));
  });

  it('a node that is down: the lines of the others, then the error on the system stream', async () => {
    const workerId = await w.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    await w.stop();
    let last = '';
    try {
      await eventually(
        'the incomplete log stream error',
        async () => {
          const r = await m.docker(['service', 'logs', '--raw', 'gl']);
          last = `${r.code} ${r.stdout} ${r.stderr}`;
          return r.code !== 0 && /Error grabbing logs/.test(r.stderr);
        },
        20_000,
        300,
      ).catch((err: Error) => assert.fail(`${err.message}; last: ${last}`));
    } finally {
      // its task container kept running (live restore): the engine comes back so that leaving removes it
      await w.launch();
    }
    assert.match(
      last,
      new RegExp(
        `^1 hello-host1\n.*Error grabbing logs: warning: incomplete log stream. some logs could not be retrieved for the following reasons: node ${workerId} is not available`,
        's',
      ),
    );
  });
});
