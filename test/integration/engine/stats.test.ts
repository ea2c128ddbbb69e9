import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

type Stats = Record<string, unknown> & {
  read: string;
  preread: string;
  cpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage?: number; online_cpus?: number };
  precpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage?: number };
  memory_stats: { usage?: number; limit?: number; stats?: Record<string, number> };
  pids_stats: { current?: number };
  networks?: Record<string, { rx_bytes: number; tx_bytes: number }>;
};

const ZERO = '0001-01-01T00:00:00Z';

/** GET /containers/{id}/stats and `docker stats` against a real engine (cgroup v1 here). */
describe('container stats', () => {
  let engine: TestEngine;
  let id: string;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    id = await engine.dockerOk(['run', '-d', '--name', 'busy', 'busybox', 'sh', '-c', 'while :; do :; done']);
  });
  after(async () => {
    await engine?.destroy();
  });

  /** The first `n` lines of a streamed answer, then the connection is dropped. */
  const streamLines = (path: string, n: number): Promise<Stats[]> =>
    new Promise((resolve, reject) => {
      const req = request({ socketPath: engine.socket, path }, (res) => {
        let buf = '';
        const lines: Stats[] = [];
        res.on('data', (d: Buffer) => {
          buf += d.toString();
          let nl = buf.indexOf('\n');
          while (nl >= 0) {
            lines.push(JSON.parse(buf.slice(0, nl)) as Stats);
            buf = buf.slice(nl + 1);
            nl = buf.indexOf('\n');
          }
          if (lines.length >= n) {
            req.destroy();
            resolve(lines);
          }
        });
        res.on('end', () => resolve(lines));
      });
      req.setTimeout(20_000, () => req.destroy(new Error('stats stream timed out')));
      req.on('error', (err) => (err.message === 'socket hang up' ? undefined : reject(err)));
      req.end();
    });

  it('one sample of a running container: dockerd keys, two reads a second apart, real figures', async () => {
    const r = await engine.request('GET', '/v1.41/containers/busy/stats?stream=false');
    assert.equal(r.status, 200);
    const s = r.json<Stats>();
    assert.deepEqual(Object.keys(s), [
      'read',
      'preread',
      'pids_stats',
      'blkio_stats',
      'num_procs',
      'storage_stats',
      'cpu_stats',
      'precpu_stats',
      'memory_stats',
      'name',
      'id',
      'networks',
    ]);
    assert.equal(s.name, '/busy');
    assert.equal(s.id, id);
    const gap = Date.parse(s.read) - Date.parse(s.preread);
    assert.ok(gap >= 900 && gap < 5000, `${s.preread} -> ${s.read}`);
    // a busy loop: its CPU time grew between the two reads, as the host's did
    assert.ok(s.cpu_stats.cpu_usage.total_usage > s.precpu_stats.cpu_usage.total_usage);
    assert.ok((s.cpu_stats.system_cpu_usage ?? 0) > (s.precpu_stats.system_cpu_usage ?? 0));
    assert.ok((s.cpu_stats.online_cpus ?? 0) >= 1);
    assert.ok((s.memory_stats.usage ?? 0) > 0);
    assert.ok((s.memory_stats.limit ?? 0) > 0);
    assert.ok('rss' in (s.memory_stats.stats ?? {}));
    assert.ok((s.pids_stats.current ?? 0) >= 1);
    // its bridge interface, not loopback
    assert.deepEqual(Object.keys(s.networks ?? {}), ['eth0']);

    const once = (
      await engine.request('GET', '/v1.41/containers/busy/stats?stream=false&one-shot=true')
    ).json<Stats>();
    assert.equal(once.preread, ZERO);
    assert.equal(once.precpu_stats.cpu_usage.total_usage, 0);
  });

  it('streams a sample a second, each carrying the previous CPU figures, and ends when the container stops', async () => {
    const lines = await streamLines('/v1.41/containers/busy/stats', 3);
    assert.equal(lines.length, 3);
    assert.equal(lines[0]?.preread, ZERO);
    assert.equal(lines[1]?.preread, lines[0]?.read);
    assert.equal(lines[2]?.preread, lines[1]?.read);
    assert.equal(lines[2]?.precpu_stats.cpu_usage.total_usage, lines[1]?.cpu_stats.cpu_usage.total_usage);

    await engine.dockerOk(['run', '-d', '--name', 'brief', 'busybox', 'sleep', '2']);
    const brief = await streamLines('/v1.41/containers/brief/stats', 100);
    assert.ok(brief.length >= 1 && brief.length <= 4, `${brief.length} samples`);
  });

  it('a stopped container: one zeroed object, as dockerd; an unknown one is a 404', async () => {
    const created = await engine.dockerOk(['create', '--name', 'idle', 'busybox', 'true']);
    const s = (await engine.request('GET', '/v1.41/containers/idle/stats?stream=false')).json<Stats>();
    assert.equal(s.read, ZERO);
    assert.deepEqual(s.memory_stats, {});
    assert.deepEqual(s.pids_stats, {});
    assert.equal(s.id, created);
    assert.equal('networks' in s, false);
    const missing = await engine.request('GET', '/v1.41/containers/nope/stats?stream=false');
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.json(), { message: 'No such container: nope' });
  });

  it('docker stats --no-stream shows the running containers', async () => {
    const rows = (await engine.dockerOk(['stats', '--no-stream', '--format', '{{json .}}']))
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    const busy = rows.find((r) => r.Name === 'busy');
    assert.ok(busy, JSON.stringify(rows));
    assert.equal(busy.ID, id.slice(0, 12));
    assert.match(busy.CPUPerc ?? '', /^\d+\.\d\d%$/);
    assert.ok(Number.parseFloat(busy.CPUPerc ?? '0') > 1, `a busy loop at ${busy.CPUPerc}`);
    assert.match(busy.MemUsage ?? '', /iB \/ /);
    assert.equal(busy.PIDs, '1');
    await engine.dockerOk(['rm', '-f', 'busy']);
  });
});
