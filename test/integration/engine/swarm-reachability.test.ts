import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine } from '../../helpers/swarm-netns.js';

/**
 * ManagerStatus.Reachability from the manager's etcd member (issue 14 §5), on three managers in
 * network namespaces (heartbeat 1 s): a member that stops answering while its engine lives turns
 * its node `unreachable` on the other managers within a few heartbeats, and `reachable` again once
 * its engine's supervisor has restarted it. The member is frozen (SIGSTOP) first, so the window
 * is the test's and not the 0.5 s the supervisor takes to restart a member killed outright; then
 * it is killed with SIGKILL and the supervisor restarts it.
 */

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, ms: number): Promise<T> {
  const start = Date.now();
  let last: T = await fn();
  while (!ok(last)) {
    if (Date.now() - start > ms) assert.fail(`${what}: still ${JSON.stringify(last)} after ${ms} ms`);
    await sleep(100);
    last = await fn();
  }
  return last;
}

describe('swarm manager reachability from the etcd member (three managers)', () => {
  let hosts: SwarmHosts;
  let h1: NsEngine;
  let h2: NsEngine;
  let h3: NsEngine;
  let frozen: number | undefined;

  const reach = async (e: NsEngine, host: string) =>
    (await e.docker(['node', 'inspect', host, '--format', '{{.ManagerStatus.Reachability}}'])).stdout.trim();
  const memberPid = async (e: NsEngine) =>
    Number((await readFile(join(e.dir, 'exec', 'swarm', 'etcd.pid'), 'utf8')).trim());

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'manager', 'manager'], { busybox: 'none' });
    [h1, h2, h3] = hosts.engines as [NsEngine, NsEngine, NsEngine];
  });
  after(async () => {
    if (frozen !== undefined) {
      try {
        process.kill(frozen, 'SIGKILL');
      } catch {}
    }
    await hosts?.destroy();
  });

  it('turns a manager unreachable while its member does not answer, and reachable once it is back', async () => {
    for (const e of [h1, h3])
      await until(
        `host2 on ${e.hostname}`,
        () => reach(e, 'host2'),
        (r) => r === 'reachable',
        20_000,
      );
    const pid = await memberPid(h2);
    assert.ok(pid > 0);
    process.kill(pid, 'SIGSTOP');
    frozen = pid;
    const stoppedAt = Date.now();
    for (const e of [h1, h3])
      await until(
        `host2 unreachable on ${e.hostname}`,
        () => reach(e, 'host2'),
        (r) => r === 'unreachable',
        15_000,
      );
    const took = Date.now() - stoppedAt;
    // the others stay as they were
    assert.equal(await reach(h1, 'host3'), 'reachable');

    process.kill(pid, 'SIGKILL');
    frozen = undefined;
    for (const e of [h1, h3])
      await until(
        `host2 reachable again on ${e.hostname}`,
        () => reach(e, 'host2'),
        (r) => r === 'reachable',
        30_000,
      );
    const again = await memberPid(h2);
    assert.notEqual(again, pid, 'the supervisor started a new member');
    assert.ok(took < 15_000);
  });
});
