import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { eventually } from '../../helpers/eventually.js';
import { NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';

/**
 * Service logs with two managers (issue 14 §6): each manager's own agent keeps its stream on its
 * own cluster API, so the other manager's node is reached through the subscription it writes to
 * etcd; either manager answers with both nodes' lines.
 */
describe('swarm service logs across two managers', () => {
  let net: TestNetwork;
  let m1: NsEngine;
  let m2: NsEngine;

  before(async () => {
    net = await TestNetwork.create(2);
    [m1, m2] = await Promise.all([
      NsEngine.start(net.hosts[0] ?? '', 'host1'),
      NsEngine.start(net.hosts[1] ?? '', 'host2'),
    ]);
    const tarball = await busyboxTarball();
    await Promise.all(
      [m1, m2].map((e) => e.dockerOk(['import', ...BUSYBOX_CHANGES, tarball, 'busybox:latest'])),
    );
    await m1.dockerOk(['swarm', 'init', '--dispatcher-heartbeat', '1s']);
    const token = await m1.dockerOk(['swarm', 'join-token', '-q', 'manager']);
    await m2.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]);
  });
  after(async () => {
    await m2?.destroy();
    await m1?.destroy();
    await net?.destroy();
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
