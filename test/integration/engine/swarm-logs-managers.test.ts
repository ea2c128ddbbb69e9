import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../helpers/eventually.js';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine } from '../../helpers/swarm-netns.js';

/**
 * Service logs with two managers (issue 14 §6): each manager's own agent keeps its stream on its
 * own cluster API, so the other manager's node is reached through the subscription it writes to
 * etcd; either manager answers with both nodes' lines.
 */
describe('swarm service logs across two managers', () => {
  let hosts: SwarmHosts;
  let m1: NsEngine;
  let m2: NsEngine;

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'manager']);
    [m1, m2] = hosts.engines as [NsEngine, NsEngine];
  });
  after(async () => {
    await hosts?.destroy();
  });

  it('either manager gets both nodes’ lines', async () => {
    await m1.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'gm',
      '--mode',
      'global',
      '-e',
      'NODE={{.Node.Hostname}}',
      'busybox:latest',
      'sh',
      '-c',
      'echo hello-$NODE; exec sleep 300',
    ]);
    for (const m of [m1, m2]) {
      let last = '';
      await eventually(
        `both nodes’ lines on ${m.hostname}`,
        async () => {
          const r = await m.docker(['service', 'logs', '--raw', 'gm']);
          last = `${r.code} ${r.stdout} ${r.stderr}`;
          return (
            r.code === 0 &&
            r.stdout
              .split('\n')
              .filter((l) => l !== '')
              .sort()
              .join(',') === 'hello-host1,hello-host2'
          );
        },
        30_000,
        300,
      ).catch(async (err: Error) =>
        assert.fail(
          `${err.message}; last: ${last}\n${await m.dockerOk(['service', 'ps', 'gm'])}\n${m1
            .log()
            .split('\n')
            .filter((l) => /log|subscri/i.test(l))
            .join('\n')}\n---\n${m2
            .log()
            .split('\n')
            .filter((l) => /log|subscri/i.test(l))
            .join('\n')}`,
        ),
      );
    }
  });
});
