import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { freePort } from '../../helpers/free-port.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { startAll } from '../../helpers/start-all.js';

/**
 * The same published containers on berth and on dockerd 20.10: NetworkSettings.Ports, the
 * PortBindings echo, the list's Ports, what a stopped container shows, and the errors of a taken
 * port, with host port numbers and IDs taken out.
 */

interface Engine {
  name: string;
  ok(args: string[]): Promise<string>;
  run(args: string[]): Promise<{ code: number; stderr: string }>;
}

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen({ host: '127.0.0.1', port }, () => resolve(s));
  });
}

/** Host ports as P, 64-hex IDs as ID. */
const neutral = (text: string) =>
  text
    .replace(/"HostPort":"\d+"/g, '"HostPort":"P"')
    .replace(/"PublicPort":\d+/g, '"PublicPort":"P"')
    .replace(/[0-9a-f]{64}/g, 'ID')
    .replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:P')
    .replace(/\.$/, '');

describe('published ports: berth and dockerd 20.10 answer the same', () => {
  let berth: TestEngine;
  let dockerd: ReferenceDockerd;
  let engines: Engine[];

  before(async () => {
    [berth, dockerd] = await startAll([TestEngine.start(), ReferenceDockerd.start()]);
    await ensureBusybox(berth);
    await dockerd.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), 'busybox:latest']);
    engines = [
      { name: 'berth', ok: (a) => berth.dockerOk(a, { timeoutMs: 60_000 }), run: (a) => berth.docker(a) },
      {
        name: 'dockerd',
        ok: (a) => dockerd.dockerOk(a, { timeoutMs: 60_000 }),
        run: (a) => dockerd.docker(a),
      },
    ];
  });
  after(async () => {
    await Promise.all([berth?.destroy(), dockerd?.destroy()]);
  });

  it('inspect and list of a running container, then stopped', async () => {
    const seen: string[][] = [];
    for (const e of engines) {
      await e.ok([
        'run',
        '-d',
        '--name',
        'pub',
        '-p',
        '127.0.0.1::80',
        '-p',
        '127.0.0.1::81/udp',
        '--expose',
        '7000',
        'busybox',
        'sleep',
        '60',
      ]);
      const running = [
        await e.ok(['inspect', '-f', '{{json .NetworkSettings.Ports}}', 'pub']),
        await e.ok([
          'inspect',
          '-f',
          '{{json .HostConfig.PortBindings}} {{json .Config.ExposedPorts}}',
          'pub',
        ]),
        await e.ok(['ps', '--filter', 'name=pub', '--format', '{{.Ports}}']),
      ];
      await e.ok(['stop', '-t', '0', 'pub']);
      const stopped = [
        await e.ok(['inspect', '-f', '{{json .NetworkSettings.Ports}}', 'pub']),
        await e.ok(['port', 'pub']),
      ];
      await e.ok(['rm', '-f', 'pub']);
      seen.push([...running, ...stopped].map(neutral));
    }
    assert.deepEqual(seen[0], seen[1]);
  });

  it('a port another process holds, and one the engine gave another container', async () => {
    const seen: string[][] = [];
    for (const e of engines) {
      const port = await freePort();
      const holder = await listen(port);
      try {
        const r = await e.run([
          'run',
          '-d',
          '--name',
          'taken',
          '-p',
          `127.0.0.1:${port}:80`,
          'busybox',
          'sleep',
          '60',
        ]);
        const state = await e.ok([
          'inspect',
          '-f',
          '{{.State.Status}} {{.State.ExitCode}} {{json .NetworkSettings.Ports}}',
          'taken',
        ]);
        seen.push([String(r.code), neutral(r.stderr.split('\n')[0] ?? ''), state]);
      } finally {
        await new Promise<void>((r) => holder.close(() => r()));
      }
      const port2 = await freePort();
      await e.ok(['run', '-d', '--name', 'holder', '-p', `127.0.0.1:${port2}:80`, 'busybox', 'sleep', '60']);
      const r2 = await e.run([
        'run',
        '-d',
        '--name',
        'taken2',
        '-p',
        `127.0.0.1:${port2}:80`,
        'busybox',
        'sleep',
        '60',
      ]);
      seen.at(-1)?.push(String(r2.code), neutral(r2.stderr.split('\n')[0] ?? ''));
      await e.ok(['rm', '-f', 'taken', 'taken2', 'holder']);
    }
    assert.deepEqual(seen[0], seen[1]);
  });
});
