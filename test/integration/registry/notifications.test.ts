// Notifications (`notifications.endpoints`): distribution's envelope, delivered in order, queued
// on disk while the endpoint fails, kept over a kill -9; compared with Debian's docker-registry.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RegistryEvent } from '../../../src/registry/notifications/events.js';
import { eventually } from '../../helpers/eventually.js';
import { http, OCI_MANIFEST, pushBlob, pushImage, startTestRegistry } from '../../helpers/registry.js';
import { startRegistryOnRoot } from '../../helpers/registry-process.js';
import { startReferenceRegistry } from '../../helpers/registry-reference.js';

/** A loopback HTTP receiver: records every envelope it accepts; answers 500 while failing. */
class Receiver {
  server: Server;
  url = '';
  events: RegistryEvent[] = [];
  requests: Array<{ headers: Record<string, string | string[] | undefined> }> = [];
  failing = false;
  refused = 0;
  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (this.failing) {
          this.refused++;
          res.statusCode = 500;
          res.end('down');
          return;
        }
        this.requests.push({ headers: req.headers });
        const envelope = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events: RegistryEvent[] };
        this.events.push(...envelope.events);
        res.end();
      });
    });
  }
  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/events`;
    return this;
  }
  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function endpointConfig(url: string, extra: Record<string, unknown> = {}) {
  return {
    endpoints: [
      {
        name: 'test',
        url,
        headers: { 'X-Test': ['one'] },
        timeout: '2s',
        threshold: 2,
        backoff: '100ms',
        ...extra,
      },
    ],
  };
}

/** The same requests against any registry: push an image, pull it, mount, delete. */
async function workload(base: string): Promise<{ manifest: string; layer: string; config: string }> {
  const img = await pushImage(base, 'events/app', 'v1', { layer: 'notification layer' });
  assert.equal(
    (await http('GET', `${base}/v2/events/app/manifests/v1`, { headers: { Accept: OCI_MANIFEST } })).status,
    200,
  );
  assert.equal(
    (
      await http('HEAD', `${base}/v2/events/app/manifests/${img.digest}`, {
        headers: { Accept: OCI_MANIFEST },
      })
    ).status,
    200,
  );
  assert.equal((await http('GET', `${base}/v2/events/app/blobs/${img.layer}`)).status, 200);
  assert.equal(
    (await http('POST', `${base}/v2/events/copy/blobs/uploads/?mount=${img.layer}&from=events/app`)).status,
    201,
  );
  assert.equal((await http('DELETE', `${base}/v2/events/copy/blobs/${img.layer}`)).status, 202);
  assert.equal((await http('DELETE', `${base}/v2/events/app/manifests/${img.digest}`)).status, 202);
  return { manifest: img.digest, layer: img.layer, config: img.config };
}

/** An event without what differs from run to run (ids, times, ports). */
function shape(e: RegistryEvent) {
  return {
    action: e.action,
    target: { ...e.target, url: e.target.url ? new URL(e.target.url).pathname : undefined },
    method: e.request.method,
    actor: e.actor,
  };
}

const COUNT_OF_WORKLOAD = 10;

describe('notifications', () => {
  let receiver: Receiver;
  before(async () => {
    receiver = await new Receiver().start();
  });
  after(async () => receiver.stop());

  it('every event in distribution’s envelope, in order, the same as the reference registry sends', async () => {
    const reg = await startTestRegistry({
      notifications: { ...endpointConfig(receiver.url), events: { includereferences: true } },
    });
    receiver.events = [];
    receiver.requests = [];
    try {
      await workload(reg.url);
      await eventually("the workload's events", () => receiver.events.length === COUNT_OF_WORKLOAD, 10_000);
    } finally {
      await reg.stop();
    }
    const ours = receiver.events.slice();
    assert.equal(
      receiver.requests[0]?.headers['content-type'],
      'application/vnd.docker.distribution.events.v1+json',
    );
    assert.equal(receiver.requests[0]?.headers['x-test'], 'one');
    for (const e of ours) {
      assert.match(e.id, /^[0-9a-f-]{36}$/);
      assert.ok(!Number.isNaN(Date.parse(e.timestamp)));
      assert.match(e.request.addr, /^127\.0\.0\.1:\d+$/);
      assert.match(e.request.host, /^127\.0\.0\.1:\d+$/);
      assert.match(e.source.addr, /:\d+$/);
      assert.match(e.source.instanceID, /^[0-9a-f-]{36}$/);
    }
    // Debian's docker-registry, same requests, same endpoint settings.
    const root = await mkdtemp(join(tmpdir(), 'berth-ref-events-'));
    receiver.events = [];
    const ref = await startReferenceRegistry(root, {
      extraConfig: [
        'notifications:',
        '  endpoints:',
        '    - name: test',
        `      url: ${receiver.url}`,
        '      timeout: 2s',
        '      threshold: 2',
        '      backoff: 100ms',
        '  events:',
        '    includereferences: true',
      ],
    });
    try {
      await workload(ref.url);
      await eventually("the workload's events", () => receiver.events.length === COUNT_OF_WORKLOAD, 10_000);
    } finally {
      await ref.stop();
      await rm(root, { recursive: true, force: true });
    }
    const theirs = receiver.events.slice();
    assert.deepEqual(ours.map(shape), theirs.map(shape));
    // includereferences: the manifest push lists its config and layer.
    assert.equal(ours[2]?.target.references?.length, 2);
    // Same fields in the same order, envelope and target.
    assert.deepEqual(Object.keys(ours[0] ?? {}), Object.keys(theirs[0] ?? {}));
    assert.deepEqual(Object.keys(ours[4]?.target ?? {}), Object.keys(theirs[4]?.target ?? {}));
  });

  it('ignore.actions and ignoredmediatypes leave events out', async () => {
    const reg = await startTestRegistry({
      notifications: endpointConfig(receiver.url, {
        ignoredmediatypes: ['application/octet-stream'],
        ignore: { actions: ['pull'] },
      }),
    });
    receiver.events = [];
    try {
      await pushImage(reg.url, 'events/filtered', 'v1');
      const d = await pushBlob(reg.url, 'events/filtered', 'x');
      await http('GET', `${reg.url}/v2/events/filtered/blobs/${d}`);
      await http('GET', `${reg.url}/v2/events/filtered/manifests/v1`, { headers: { Accept: OCI_MANIFEST } });
      await eventually('one event', () => receiver.events.length === 1, 10_000);
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(
        receiver.events.map((e) => [e.action, e.target.mediaType]),
        [['push', OCI_MANIFEST]],
      );
    } finally {
      await reg.stop();
    }
  });

  it('while the endpoint answers 500 events queue (answers are not held up) and arrive in order after it recovers', async () => {
    const reg = await startTestRegistry({ notifications: endpointConfig(receiver.url) });
    receiver.events = [];
    receiver.failing = true;
    receiver.refused = 0;
    try {
      const pushed: string[] = [];
      const started = Date.now();
      for (let i = 0; i < 5; i++) pushed.push(await pushBlob(reg.url, 'events/queued', `blob ${i}`));
      assert.ok(Date.now() - started < 5_000, 'pushes were not held up by the failing endpoint');
      await eventually('refused deliveries', () => receiver.refused >= 3, 10_000);
      assert.equal(receiver.events.length, 0);
      assert.equal(reg.notifier?.endpoints[0]?.pending, 5);
      receiver.failing = false;
      await eventually('five events', () => receiver.events.length === 5, 10_000);
      assert.deepEqual(
        receiver.events.map((e) => e.target.digest),
        pushed,
      );
    } finally {
      receiver.failing = false;
      await reg.stop();
    }
  });

  /** A directory with a config whose endpoint is the receiver, which is made to refuse (500). */
  async function failingReceiverSetup(
    prefix: string,
  ): Promise<{ dir: string; config: string; root: string }> {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    const config = join(dir, 'config.yml');
    await writeFile(
      config,
      JSON.stringify({
        version: '0.1',
        log: { level: 'error', accesslog: { disabled: true } },
        notifications: endpointConfig(receiver.url),
      }),
    );
    receiver.events = [];
    receiver.failing = true;
    receiver.refused = 0;
    return { dir, config, root: join(dir, 'root') };
  }

  it('after a kill -9 the queued events are sent by the next process, in order', async () => {
    const { dir, config, root } = await failingReceiverSetup('berth-events-kill-');
    const first = await startRegistryOnRoot(root, ['--config', config]);
    const pushed: string[] = [];
    try {
      for (let i = 0; i < 4; i++) pushed.push(await pushBlob(first.url, 'events/killed', `killed ${i}`));
      await eventually('refused deliveries', () => receiver.refused >= 2, 10_000);
    } finally {
      await first.proc.stop('SIGKILL');
    }
    receiver.failing = false;
    const second = await startRegistryOnRoot(root, ['--config', config]);
    try {
      pushed.push(await pushBlob(second.url, 'events/killed', 'after the restart'));
      await eventually('five events', () => receiver.events.length === 5, 15_000);
      assert.deepEqual(
        receiver.events.map((e) => e.target.digest),
        pushed,
      );
      assert.ok(receiver.events.every((e) => e.action === 'push'));
    } finally {
      await second.proc.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('two processes on one storage each send their own events once; a killed one’s go with its restart', async () => {
    const { dir, config, root } = await failingReceiverSetup('berth-events-two-');
    const a = await startRegistryOnRoot(root, ['--config', config]);
    const b = await startRegistryOnRoot(root, ['--config', config]);
    let a2: Awaited<ReturnType<typeof startRegistryOnRoot>> | undefined;
    try {
      const pushedA: string[] = [];
      const pushedB: string[] = [];
      for (let i = 0; i < 3; i++) {
        pushedA.push(await pushBlob(a.url, 'events/two', `from a ${i}`));
        pushedB.push(await pushBlob(b.url, 'events/two', `from b ${i}`));
      }
      await eventually('refused deliveries', () => receiver.refused >= 4, 10_000);
      await a.proc.stop('SIGKILL');
      a2 = await startRegistryOnRoot(root, ['--config', config]);
      const pushedA2 = [await pushBlob(a2.url, 'events/two', 'from a2')];
      receiver.failing = false;
      await eventually('seven events', () => receiver.events.length >= 7, 15_000);
      await new Promise((r) => setTimeout(r, 300));
      // Each event once; each process's events in its order (the killed one's sent by its
      // successor before the successor's own).
      assert.equal(receiver.events.length, 7);
      const bySource = new Map<string, string[]>();
      for (const e of receiver.events)
        bySource.set(e.source.instanceID, [
          ...(bySource.get(e.source.instanceID) ?? []),
          e.target.digest ?? '',
        ]);
      assert.deepEqual(
        [...bySource.values()].sort((x, y) => (x[0] ?? '').localeCompare(y[0] ?? '')),
        [pushedA, pushedB, pushedA2].sort((x, y) => (x[0] ?? '').localeCompare(y[0] ?? '')),
      );
      const digests = receiver.events.map((e) => e.target.digest);
      assert.ok(digests.indexOf(pushedA[2]) < digests.indexOf(pushedA2[0]), digests.join(' '));
      // Nothing left queued: the killed process's queue went once delivered.
      const queues = join(root, 'berth/notifications/test');
      await eventually('the killed queue removed', async () => (await readdir(queues)).length === 2, 5_000);
    } finally {
      receiver.failing = false;
      await Promise.all([a.proc.stop(), b.proc.stop(), a2?.proc.stop()]);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
