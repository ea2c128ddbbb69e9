import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { type ClientRequest, request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { member, tarOf } from '../../helpers/tar-builder.js';

/** The freezer state of a process's cgroup: FROZEN/FREEZING/THAWED (v1) or frozen 0/1 (v2). */
async function frozen(pid: number): Promise<boolean> {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.find((l) => l.split(':')[1] === 'freezer');
  if (v1) {
    const state = await readFile(
      join('/sys/fs/cgroup/freezer', v1.split(':')[2] ?? '', 'freezer.state'),
      'utf8',
    );
    return state.trim() !== 'THAWED';
  }
  const v2 = lines.find((l) => l.startsWith('0::'));
  const events = await readFile(join('/sys/fs/cgroup', v2?.slice(3) ?? '', 'cgroup.events'), 'utf8');
  return /^frozen 1$/m.test(events);
}

/** A PUT of an archive whose body the test writes piece by piece (chunked). */
function openPut(
  engine: TestEngine,
  path: string,
  headers: Record<string, string> = {},
): { req: ClientRequest; response: Promise<{ status: number; text: string }> } {
  const req = httpRequest({
    socketPath: engine.socket,
    method: 'PUT',
    path: `/v1.41/containers/up/archive?path=${encodeURIComponent(path)}`,
    headers: { 'Content-Type': 'application/x-tar', ...headers },
  });
  const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
  });
  response.catch(() => undefined);
  return { req, response };
}

/**
 * docker cp into a running container: the archive is received (spooled under the data root)
 * before anything is written, so a slow or stalled upload never freezes the container; the spool
 * is removed after success, failure and a client that leaves; a body over the cap is a 413.
 */
describe('docker cp upload (spooled archive)', () => {
  let engine: TestEngine;
  let pid: number;
  let spoolDir: string;
  const ok = (...args: string[]) => engine.dockerOk(args);
  const spooled = async () =>
    (await readdir(spoolDir).catch(() => [] as string[])).filter((n) => n.startsWith('cp-'));

  before(async () => {
    // a cap of its own (--copy-upload-limit), so the 413 below proves the flag reaches the service
    engine = await TestEngine.start({ args: ['--copy-upload-limit', '4m'] });
    await ensureBusybox(engine);
    spoolDir = join(engine.dataRoot, 'tmp');
    // a process that ticks every 100 ms: it stops ticking while the container is frozen
    await ok(
      'run',
      '-d',
      '--name',
      'up',
      'busybox',
      'sh',
      '-c',
      // written whole (a rename), so that a read never sees the file emptied by the shell's >
      'i=0; while true; do i=$((i+1)); echo $i > /tick.new; mv /tick.new /tick; sleep 0.1; done',
    );
    pid = Number(await ok('inspect', '-f', '{{.State.Pid}}', 'up'));
  });
  after(async () => {
    await engine?.destroy();
  });

  it('a stalled upload does not pause the container; the archive lands once complete and its spool is gone', async () => {
    const tar = tarOf([
      { name: 'slow/', type: 'directory' },
      { name: 'slow/f', data: Buffer.alloc(100_000, 0x61) },
    ]);
    const { req, response } = openPut(engine, '/tmp');
    req.write(tar.subarray(0, 50_000));
    await sleep(300);
    const tickBefore = Number(await ok('exec', 'up', 'cat', '/tick'));
    // the stall: 2.5 s with half the archive sent
    const deadline = Date.now() + 2500;
    let checks = 0;
    while (Date.now() < deadline) {
      assert.equal(await frozen(pid), false, 'the container is frozen while the upload stalls');
      checks++;
      await sleep(250);
    }
    const exec = await engine.docker(['exec', 'up', 'cat', '/tick'], { timeoutMs: 5000 });
    assert.equal(exec.code, 0, exec.stderr);
    assert.ok(Number(exec.stdout) > tickBefore + 5, `ticks went on: ${tickBefore} -> ${exec.stdout}`);
    assert.ok(checks >= 5);
    // what was sent waits in the engine's storage, under its data root
    assert.equal((await spooled()).length, 1);
    req.end(tar.subarray(50_000));
    const r = await response;
    assert.equal(r.status, 200, r.text);
    assert.equal(await ok('exec', 'up', 'sh', '-c', 'wc -c < /tmp/slow/f'), '100000');
    assert.deepEqual(await spooled(), []);
    assert.equal(await frozen(pid), false);
  });

  it('removes the spool after a failed extraction and after a client that leaves mid-upload', async () => {
    // garbage: refused before the container is touched
    const bad = await engine.request('PUT', '/v1.41/containers/up/archive?path=/tmp', {
      body: Buffer.from('not a tar '.repeat(100)),
    });
    assert.equal(bad.status, 400, bad.text());
    assert.deepEqual(await spooled(), []);
    // a member that fails while written (a directory over an existing file, refused)
    await ok('exec', 'up', 'sh', '-c', 'mkdir -p /tmp/fail && echo x > /tmp/fail/file');
    const conflict = await engine.request(
      'PUT',
      '/v1.41/containers/up/archive?path=/tmp/fail&noOverwriteDirNonDir=true',
      { body: tarOf([{ name: 'file/', type: 'directory' }]) },
    );
    assert.equal(conflict.status, 400, conflict.text());
    assert.deepEqual(await spooled(), []);
    // the client goes away with half an archive sent
    const { req } = openPut(engine, '/tmp');
    req.write(tarOf([{ name: 'gone', data: Buffer.alloc(200_000, 1) }]).subarray(0, 60_000));
    await eventually('the spool file', async () => (await spooled()).length === 1, 5000);
    req.destroy();
    await eventually('the spool removed', async () => (await spooled()).length === 0, 5000);
    assert.equal(await frozen(pid), false);
    assert.notEqual((await engine.docker(['exec', 'up', 'test', '-e', '/tmp/gone'])).code, 0);
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });

  it('takes uploads into one container at the same time (each written frozen, one after the other)', async () => {
    await ok('exec', 'up', 'mkdir', '-p', '/par/0', '/par/1', '/par/2', '/par/3');
    const tar = tarOf(Array.from({ length: 200 }, (_, i) => ({ name: `f${i}`, data: `${i}` })));
    const answers = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        engine.request('PUT', `/v1.41/containers/up/archive?path=/par/${i}`, { body: tar }),
      ),
    );
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 200, 200],
      answers.map((r) => r.text()).join(' '),
    );
    assert.equal(await ok('exec', 'up', 'sh', '-c', 'ls /par/0 /par/1 /par/2 /par/3 | grep -c ^f'), '800');
    assert.equal(await frozen(pid), false);
    assert.deepEqual(await spooled(), []);
  });

  it('answers 413 for a declared length over the cap (--copy-upload-limit), before reading the body', async () => {
    const { req, response } = openPut(engine, '/tmp', { 'Content-Length': String(5 * 1024 * 1024) });
    req.write(member({ name: 'x', data: 'x' }));
    const r = await response;
    req.destroy();
    assert.equal(r.status, 413, r.text);
    assert.match(r.text, /archive is larger than the engine accepts/);
    assert.deepEqual(await spooled(), []);
  });

  it('takes a gzip, xz or zstd archive as dockerd does; a small bomb over the cap is a 413', async () => {
    const tar = tarOf([{ name: 'packed/a.txt', data: 'squeezed' }]);
    const forms: Array<[string, Buffer]> = [
      ['gzip', gzipSync(tar)],
      ['xz', execFileSync('xz', ['-c'], { input: tar })],
      ['zstd', execFileSync('zstd', ['-c', '-q'], { input: tar })],
    ];
    for (const [kind, body] of forms) {
      const put = await engine.request('PUT', `/v1.41/containers/up/archive?path=/tmp`, { body });
      assert.equal(put.status, 200, `${kind}: ${put.text()}`);
      assert.equal((await ok('exec', 'up', 'cat', '/tmp/packed/a.txt')).trim(), 'squeezed', kind);
      await ok('exec', 'up', 'rm', '-r', '/tmp/packed');
    }
    // 5 MiB of zeros gzip to a few KiB: under the 4 MiB cap as sent, over it once unpacked
    const bomb = gzipSync(tarOf([{ name: 'bomb', data: Buffer.alloc(5 * 1024 * 1024) }]));
    const r = await engine.request('PUT', '/v1.41/containers/up/archive?path=/tmp', { body: bomb });
    assert.equal(r.status, 413, r.text());
    assert.match(r.text(), /archive is larger than the engine accepts/);
    assert.equal((await engine.docker(['exec', 'up', 'ls', '/tmp/bomb'])).code !== 0, true);
    assert.deepEqual(await spooled(), []);
  });
});
