import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { removeBridgeFromHost } from '../../src/engine/network/host-cleanup.js';
import { freePort } from '../helpers/free-port.js';
import { runCommand } from '../helpers/process.js';

const repoRoot = resolve(import.meta.dirname, '../..');

function ping(socketPath: string): Promise<number> {
  return new Promise((done) => {
    const req = request({ socketPath, path: '/_ping' }, (res) => {
      res.resume();
      done(res.statusCode ?? 0);
    });
    req.on('error', () => done(0));
    req.end();
  });
}

describe('berth up', () => {
  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('runs the registry and the engine, and a fresh data root can run busybox at once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-up-'));
    const socket = join(dir, 'berth.sock');
    const port = await freePort();
    // a bridge of its own, removed afterwards (up keeps its bridge for the next start, as dockerd;
    // the default berth0 may be a real engine's on this host)
    const bridge = `bu${randomBytes(4).toString('hex')}`;
    const config = join(dir, 'daemon.json');
    await writeFile(config, JSON.stringify({ bridge }));
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(repoRoot, 'src/cli/main.ts'),
        'up',
        '--config-file',
        config,
        '--data-root',
        join(dir, 'data'),
        '--exec-root',
        join(dir, 'exec'),
        '--host',
        `unix://${socket}`,
        '--registry-addr',
        `127.0.0.1:${port}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    child.stderr.on('data', (d: Buffer) => {
      log += d.toString();
    });
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await removeBridgeFromHost(bridge);
      await rm(dir, { recursive: true, force: true });
    });

    for (let i = 0; i < 300 && (await ping(socket)) !== 200; i++) await sleep(100);
    assert.equal(await ping(socket), 200, log);
    // No waiting for anything else: busybox is there as soon as the API answers.
    const run = await runCommand(
      'docker',
      ['-H', `unix://${socket}`, 'run', '--rm', 'busybox', 'echo', 'hello'],
      {
        env: { DOCKER_CONFIG: join(dir, 'docker-config'), DOCKER_HOST: '' },
      },
    );
    assert.equal(run.code, 0, `${run.stderr}\n${log}`);
    assert.equal(run.stdout, 'hello\n');
    const v2 = await fetch(`http://127.0.0.1:${port}/v2/`);
    assert.equal(v2.status, 200);
    assert.equal(v2.headers.get('docker-distribution-api-version'), 'registry/2.0');

    child.kill('SIGTERM');
    assert.equal(await exited, 0, log);
    assert.match(log, /seeded busybox:latest/);
  });

  it('reads its configuration file, and refuses an option given both ways', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-up-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const socket = join(dir, 'berth.sock');
    const port = await freePort();
    const config = join(dir, 'daemon.json');
    await writeFile(
      config,
      JSON.stringify({
        'data-root': join(dir, 'data'),
        'exec-root': join(dir, 'exec'),
        bridge: 'none',
        'registry-mirrors': ['http://127.0.0.1:1'],
        'insecure-registries': ['lan:5000'],
      }),
    );
    const up = (extra: string[]) =>
      spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          join(repoRoot, 'src/cli/main.ts'),
          'up',
          '--config-file',
          config,
          '--host',
          `unix://${socket}`,
          '--registry-addr',
          `127.0.0.1:${port}`,
          '--no-registry',
          ...extra,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
    const refused = up(['--data-root', join(dir, 'other')]);
    let refusedLog = '';
    refused.stderr.on('data', (d: Buffer) => {
      refusedLog += d.toString();
    });
    const code = await new Promise<number | null>((done) => refused.on('exit', (c) => done(c)));
    assert.equal(code, 2, refusedLog);
    assert.match(
      refusedLog,
      /the following directives are specified both as a flag and in the configuration file: data-root: \(from flag: /,
    );

    const child = up([]);
    let log = '';
    child.stderr.on('data', (d: Buffer) => {
      log += d.toString();
    });
    const exited = new Promise<number | null>((done) => child.on('exit', (c) => done(c)));
    cleanups.push(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    for (let i = 0; i < 300 && (await ping(socket)) !== 200; i++) await sleep(100);
    assert.equal(await ping(socket), 200, log);
    const info = await runCommand(
      'docker',
      ['-H', `unix://${socket}`, 'info', '--format', '{{json .RegistryConfig}}'],
      {
        env: { DOCKER_CONFIG: join(dir, 'docker-config'), DOCKER_HOST: '' },
      },
    );
    const registry = JSON.parse(info.stdout) as { Mirrors: string[]; IndexConfigs: Record<string, unknown> };
    assert.deepEqual(registry.Mirrors, ['http://127.0.0.1:1/']);
    assert.deepEqual(Object.keys(registry.IndexConfigs), [
      `127.0.0.1:${port}`,
      'docker.io',
      'lan:5000',
      `localhost:${port}`,
    ]);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, log);
  });
});
