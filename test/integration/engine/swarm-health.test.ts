import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { until } from '../../helpers/eventually.js';
import { runCommand } from '../../helpers/process.js';
import { engineLogsOnFailure, NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';

/**
 * Health checks and the VIP (issue 14 §9 step 2), on one host: a task whose container has a
 * health check stays `starting` until healthy, and only a healthy task is behind its service's
 * VIP and `tasks.<name>`; a task that turns unhealthy is shut down, fails with swarmkit's
 * `task: non-zero exit (N): dockerexec: unhealthy container`, leaves the VIP and is replaced, and the
 * replacement joins the VIP once healthy. An unhealthy task leaves the VIP and `tasks.<name>` at
 * once, while its container (a long stop grace period, a process SIGTERM leaves running) has not
 * stopped yet, as dockerd takes it out of IPVS before the stop. The health check reads files the
 * test makes with exec.
 */
describe('swarm VIP backends follow health checks', () => {
  let net: TestNetwork;
  let e: NsEngine;
  let client = '';

  engineLogsOnFailure(() => (e ? [e] : []));
  before(async () => {
    net = await TestNetwork.create(1);
    e = await NsEngine.start(net.hosts[0] ?? '', 'hhost1');
    await e.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), 'busybox:latest']);
    await e.dockerOk(['swarm', 'init', '--dispatcher-heartbeat', '1s']);
    await e.dockerOk(['network', 'create', '-d', 'overlay', 'ov']);
  });
  after(async () => {
    await e?.destroy();
    await net?.destroy();
  });

  /** The service's tasks: ID, state, error, container. */
  async function tasks(service: string) {
    const ids = (await e.dockerOk(['service', 'ps', '-q', '--no-trunc', service]))
      .split('\n')
      .filter(Boolean);
    const out = [];
    for (const id of ids) {
      const [t] = JSON.parse(await e.dockerOk(['inspect', '--type', 'task', id])) as Array<{
        ID: string;
        DesiredState: string;
        Status: { State: string; Err?: string; ContainerStatus?: { ContainerID?: string } };
      }>;
      if (t)
        out.push({
          id: t.ID,
          desired: t.DesiredState,
          state: t.Status.State,
          err: t.Status.Err ?? '',
          container: (t.Status.ContainerStatus?.ContainerID ?? '').slice(0, 12),
        });
    }
    return out;
  }

  /** `n` new connections to the VIP from the client task: who answered (or `refused`/`none`). */
  async function hits(n: number, service = 'hweb'): Promise<string[]> {
    const loop = `for i in $(seq ${n}); do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 ${service} 8080 || echo none; echo; done`;
    const r = await e.docker(['exec', client, 'sh', '-c', loop]);
    return [...r.stdout.matchAll(/hw-([0-9a-f]{12})|none/g)].map((m) => m[1] ?? 'none');
  }

  async function tasksLookup(service = 'hweb'): Promise<string[]> {
    const r = await e.docker(['exec', client, 'nslookup', `tasks.${service}`]);
    return [...r.stdout.matchAll(/Address(?: \d+)?:\s+(10\.0\.\d+\.\d+)/g)].map((x) => x[1] ?? '').sort();
  }

  /** The addresses the dnsrr service's name answers. */
  async function rrLookup(): Promise<string[]> {
    const r = await e.docker(['exec', client, 'nslookup', 'srr']);
    return [...r.stdout.matchAll(/Address(?: \d+)?:\s+(10\.0\.\d+\.\d+)/g)].map((x) => x[1] ?? '').sort();
  }

  const touch = (container: string, file: string) => e.dockerOk(['exec', container, 'touch', file]);

  it('keeps a task out of the VIP until healthy, and replaces one that turns unhealthy', async () => {
    await e.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'hclient',
      '--network',
      'ov',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    await e.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'hweb',
      '--network',
      'ov',
      '--replicas',
      '2',
      '--health-cmd',
      'test -f /tmp/ready && test ! -f /tmp/sick',
      '--health-interval',
      '300ms',
      '--health-retries',
      '2',
      '--health-start-period',
      '120s',
      '--stop-grace-period',
      '1s',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo hw-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    client = await until('the client task running', 30_000, async () => {
      const [t] = (await tasks('hclient')).filter((x) => x.state === 'running');
      return t?.container || undefined;
    });
    // both web tasks started: `starting` (their check fails inside the start period), not running
    const [a, b] = await until('two starting tasks', 30_000, async () => {
      const ts = (await tasks('hweb')).filter((x) => x.state === 'starting' && x.container);
      return ts.length === 2 ? ts : undefined;
    });
    assert.ok(a && b);
    const ps = await e.dockerOk(['service', 'ps', '--format', '{{.CurrentState}}', 'hweb']);
    for (const line of ps.split('\n')) assert.match(line, /^Starting /, ps);
    await sleep(1000); // several probes (300 ms apart) failed meanwhile
    assert.deepEqual(
      (await tasks('hweb')).map((t) => t.state),
      ['starting', 'starting'],
    );
    // no backend: the VIP refuses, tasks.hweb has no address
    assert.deepEqual(await hits(2), ['none', 'none']);
    assert.deepEqual(await tasksLookup(), []);

    // a healthy: the only backend
    await touch(a.container, '/tmp/ready');
    await until('a running', 10_000, async () =>
      (await tasks('hweb')).find((t) => t.id === a.id)?.state === 'running' ? true : undefined,
    );
    await until('the VIP sends to a alone', 10_000, async () => {
      const h = await hits(4);
      return h.every((x) => x === a.container) ? true : undefined;
    });
    assert.equal((await tasksLookup()).length, 1);

    // b healthy too: both
    await touch(b.container, '/tmp/ready');
    await until('the VIP spreads over a and b', 15_000, async () => {
      const h = new Set(await hits(6));
      return h.size === 2 && h.has(a.container) && h.has(b.container) ? true : undefined;
    });
    assert.equal((await tasksLookup()).length, 2);

    // a turns unhealthy: shut down, failed for it, out of the VIP; a replacement starts
    await touch(a.container, '/tmp/sick');
    const failed = await until('a failed as unhealthy', 20_000, async () => {
      const t = (await tasks('hweb')).find((x) => x.id === a.id);
      return t && t.state === 'failed' ? t : undefined;
    });
    assert.match(failed.err, /^task: non-zero exit \(\d+\): dockerexec: unhealthy container$/);
    let last: string[] = [];
    await until('the VIP sends to b alone', 25_000, async () => {
      last = await hits(4);
      return last.every((x) => x === b.container) ? true : undefined;
    }).catch((err: unknown) =>
      assert.fail(`${String(err)}; last answers ${last.join(',')} (b ${b.container})`),
    );
    const c = await until('a replacement starting', 30_000, async () =>
      (await tasks('hweb')).find(
        (t) => t.id !== a.id && t.id !== b.id && t.state === 'starting' && t.container,
      ),
    );
    assert.deepEqual(new Set(await hits(4)), new Set([b.container]), 'a starting task is no backend');
    assert.equal((await tasksLookup()).length, 1);

    // the replacement healthy: back in
    await touch(c.container, '/tmp/ready');
    await until('the VIP spreads over b and the replacement', 15_000, async () => {
      const h = new Set(await hits(6));
      return h.size === 2 && h.has(b.container) && h.has(c.container) ? true : undefined;
    });
    const ls = await e.dockerOk([
      'service',
      'ps',
      '--format',
      '{{.DesiredState}} {{.CurrentState}} {{.Error}}',
      '--no-trunc',
      'hweb',
    ]);
    assert.match(ls, /Shutdown Failed .* "task: non-zero exit \(137\): dockerexec: unhealthy container"/, ls);
    // the gateway bridge has a MAC of its own: a bridge without one takes its lowest port's, and
    // changes it when that task goes (the tasks' ARP entries of their DNS server then point nowhere)
    const sysfs = '/sys/class/net/docker_gwbridge/addr_assign_type';
    const bridgeMac = await runCommand('ip', ['netns', 'exec', net.hosts[0] ?? '', 'cat', sysfs]);
    assert.equal(bridgeMac.stdout.trim(), '3', 'the gateway bridge MAC was set (NET_ADDR_SET)');
    await e.dockerOk(['service', 'rm', 'hweb', 'hclient']);
  });

  it('takes an unhealthy task out of the VIP, tasks.<name> and dnsrr before its container has stopped', async () => {
    await e.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'sclient',
      '--network',
      'ov',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    // two services whose tasks ignore SIGTERM (PID 1 without a handler: a stop waits out the
    // grace period): a vip one and a dnsrr one
    const web = (name: string, mode: string) =>
      e.dockerOk([
        'service',
        'create',
        '-d',
        '--name',
        name,
        '--network',
        'ov',
        '--endpoint-mode',
        mode,
        '--replicas',
        '2',
        '--health-cmd',
        'test ! -f /tmp/sick',
        '--health-interval',
        '300ms',
        '--health-retries',
        '2',
        '--stop-grace-period',
        '120s',
        'busybox:latest',
        'sh',
        '-c',
        "trap '' TERM; mkdir -p /www && echo hw-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www",
      ]);
    try {
      await web('sweb', 'vip');
      await web('srr', 'dnsrr');
      client = await until('the client task running', 30_000, async () => {
        const [t] = (await tasks('sclient')).filter((x) => x.state === 'running');
        return t?.container || undefined;
      });
      const running = (service: string) =>
        until(`two running ${service} tasks`, 30_000, async () => {
          const ts = (await tasks(service)).filter((x) => x.state === 'running' && x.container);
          return ts.length === 2 ? ts : undefined;
        });
      const [a, b] = await running('sweb');
      const [ra] = await running('srr');
      assert.ok(a && b && ra);
      await until('the VIP spreads over a and b', 15_000, async () => {
        const h = new Set(await hits(6, 'sweb'));
        return h.size === 2 && h.has(a.container) && h.has(b.container) ? true : undefined;
      });
      assert.equal((await tasksLookup('sweb')).length, 2);
      await until('srr answers both tasks', 10_000, async () =>
        (await rrLookup()).length === 2 ? true : undefined,
      );

      await touch(a.container, '/tmp/sick');
      await touch(ra.container, '/tmp/sick');
      await until('a and ra unhealthy', 10_000, async () => {
        const h = await e.dockerOk([
          'inspect',
          '--format',
          '{{.State.Health.Status}}',
          a.container,
          ra.container,
        ]);
        return h === 'unhealthy\nunhealthy' ? true : undefined;
      });
      let last: string[] = [];
      await until('the VIP sends to b alone', 10_000, async () => {
        last = await hits(4, 'sweb');
        return last.every((x) => x === b.container) ? true : undefined;
      }).catch((err: unknown) =>
        assert.fail(`${String(err)}; last answers ${last.join(',')} (b ${b.container})`),
      );
      await until('srr answers the healthy task alone', 5_000, async () =>
        (await rrLookup()).length === 1 ? true : undefined,
      );
      // their containers have not stopped (the grace period runs): the VIP and the names left them first
      const stillRunning = () =>
        e.dockerOk(['inspect', '--format', '{{.State.Running}}', a.container, ra.container]);
      assert.equal(await stillRunning(), 'true\ntrue');
      assert.equal((await tasks('sweb')).find((t) => t.id === a.id)?.state, 'running');
      assert.equal((await tasksLookup('sweb')).length, 1);
      assert.equal((await tasksLookup('srr')).length, 1);
      assert.deepEqual(new Set(await hits(6, 'sweb')), new Set([b.container]));
      assert.equal(await stillRunning(), 'true\ntrue');
    } finally {
      // the stops (waiting out the grace period) cut short, whatever happened
      await e.docker(['service', 'rm', 'sweb', 'srr', 'sclient']);
      for (const service of ['sweb', 'srr']) {
        const ids = await e.docker([
          'ps',
          '-q',
          '--filter',
          `label=com.docker.swarm.service.name=${service}`,
        ]);
        const list = ids.stdout.split('\n').filter(Boolean);
        if (list.length > 0) await e.docker(['kill', ...list]);
      }
    }
  });
});
