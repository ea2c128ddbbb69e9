import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Logger } from '../../../src/common/log.js';
import { ConfigError, configFromObject } from '../../../src/registry/config.js';
import {
  type EndpointConfig,
  NotificationEndpoint,
  type PostEnvelope,
} from '../../../src/registry/notifications/endpoint.js';
import type { RegistryEvent } from '../../../src/registry/notifications/events.js';
import { queueDirName } from '../../../src/registry/notifications/notifier.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';

const quiet = new Logger('error');

function event(
  n: number,
  action: RegistryEvent['action'] = 'push',
  mediaType = 'application/octet-stream',
): RegistryEvent {
  return {
    id: `id-${n}`,
    timestamp: new Date(0).toISOString(),
    action,
    target: { mediaType, digest: `sha256:${String(n).padStart(64, '0')}`, repository: 'r' },
    request: { id: 'req', addr: '127.0.0.1:1', host: 'h', method: 'PUT', useragent: 'ua' },
    actor: {},
    source: { addr: 'h:1', instanceID: 'i' },
  };
}

function config(extra: Partial<EndpointConfig> = {}): EndpointConfig {
  return {
    name: 'e',
    url: 'http://127.0.0.1:1/',
    headers: { 'X-A': ['1', '2'] },
    timeoutMs: 1000,
    threshold: 3,
    backoffMs: 200,
    ignoredMediaTypes: [],
    ignoredActions: [],
    ...extra,
  };
}

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('notification endpoint', () => {
  let root: string;
  let driver: FilesystemDriver;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-notify-unit-'));
    driver = new FilesystemDriver(root);
  });
  after(async () => rm(root, { recursive: true, force: true }));

  it('posts one envelope per event, in order, with the configured headers, and empties its queue', async () => {
    const got: Array<{ ids: string[]; type: string | null; a: string | null }> = [];
    const post: PostEnvelope = async (_url, headers, body) => {
      got.push({
        ids: (JSON.parse(body) as { events: RegistryEvent[] }).events.map((e) => e.id),
        type: headers.get('content-type'),
        a: headers.get('x-a'),
      });
      return 200;
    };
    const ep = new NotificationEndpoint(config(), driver, '/q/ordered', quiet, post);
    await ep.start();
    for (let i = 0; i < 5; i++) assert.equal(await ep.enqueue(event(i)), true);
    await until('five deliveries', () => ep.delivered === 5);
    await ep.stop();
    assert.deepEqual(
      got.map((g) => g.ids),
      [['id-0'], ['id-1'], ['id-2'], ['id-3'], ['id-4']],
    );
    assert.equal(got[0]?.type, 'application/vnd.docker.distribution.events.v1+json');
    assert.equal(got[0]?.a, '1, 2');
    assert.deepEqual(await readdir(join(root, 'q/ordered')), []);
  });

  it('retries at once below the threshold, then waits the backoff between attempts', async () => {
    const attempts: number[] = [];
    let failing = true;
    const post: PostEnvelope = async () => {
      attempts.push(Date.now());
      return failing ? 503 : 204;
    };
    const ep = new NotificationEndpoint(config({ backoffMs: 1000 }), driver, '/q/backoff', quiet, post);
    await ep.start();
    await ep.enqueue(event(1));
    await until('five attempts', () => attempts.length >= 5);
    failing = false;
    await until('the delivery', () => ep.delivered === 1);
    await ep.stop();
    const gaps = attempts.slice(1, 5).map((t, i) => t - (attempts[i] as number));
    // attempts 1-3 follow each other; from the third failure on, the backoff (1 s) apart
    assert.ok((gaps[0] ?? 0) < 700 && (gaps[1] ?? 0) < 700, `gaps ${gaps}`);
    assert.ok((gaps[2] ?? 0) >= 980 && (gaps[3] ?? 0) >= 980, `gaps ${gaps}`);
  });

  it('a new endpoint on the same queue sends what the last one left, before anything new', async () => {
    const first = new NotificationEndpoint(config(), driver, '/q/resume', quiet, async () => 500);
    await first.start();
    await first.enqueue(event(1));
    await first.enqueue(event(2));
    await first.stop();
    const ids: string[] = [];
    const second = new NotificationEndpoint(config(), driver, '/q/resume', quiet, async (_u, _h, body) => {
      ids.push(...(JSON.parse(body) as { events: RegistryEvent[] }).events.map((e) => e.id));
      return 200;
    });
    await second.start();
    await second.enqueue(event(3));
    await until('three deliveries', () => second.delivered === 3);
    await second.stop();
    assert.deepEqual(ids, ['id-1', 'id-2', 'id-3']);
  });

  it('two processes on one storage keep their queues apart; neither sends the other’s events', async () => {
    const sent = new Map<string, string[]>();
    let failing = true;
    const poster =
      (who: string): PostEnvelope =>
      async (_u, _h, body) => {
        if (failing) return 503;
        const ids = (JSON.parse(body) as { events: RegistryEvent[] }).events.map((e) => e.id);
        sent.set(who, [...(sent.get(who) ?? []), ...ids]);
        return 200;
      };
    // Two endpoints in one process hold their leases as two processes would (a fresh lease of
    // a live pid is busy), and look for left queues every 50 ms.
    const a = new NotificationEndpoint(
      config({ backoffMs: 50 }),
      driver,
      '/q/shared',
      quiet,
      poster('a'),
      50,
    );
    const b = new NotificationEndpoint(
      config({ backoffMs: 50 }),
      driver,
      '/q/shared',
      quiet,
      poster('b'),
      50,
    );
    await a.start();
    await b.start();
    assert.notEqual(a.queueDir, b.queueDir);
    for (let i = 0; i < 4; i++) {
      await a.enqueue(event(i));
      await b.enqueue(event(100 + i));
    }
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(a.pending, 4);
    assert.equal(b.pending, 4);
    failing = false;
    await until('eight deliveries', () => a.delivered + b.delivered === 8);
    await a.stop();
    await b.stop();
    assert.deepEqual(sent.get('a'), ['id-0', 'id-1', 'id-2', 'id-3']);
    assert.deepEqual(sent.get('b'), ['id-100', 'id-101', 'id-102', 'id-103']);
    assert.deepEqual(await readdir(join(root, 'q/shared')), []);
  });

  it('a running process adopts the queue of one that died (its lease stale) and sends it first, in order', async () => {
    // What a killed process leaves: its queue directory with events and a lease not refreshed.
    const left = join(root, 'q/adopt/deadhost-1-0000');
    await mkdir(left, { recursive: true });
    for (const n of [1, 2, 3])
      await writeFile(join(left, `${String(n).padStart(16, '0')}.json`), JSON.stringify(event(n)));
    await writeFile(join(left, 'owner'), JSON.stringify({ pid: 1, host: 'deadhost', since: '' }));
    const old = new Date(Date.now() - 120_000);
    await utimes(join(left, 'owner'), old, old);
    const ids: string[] = [];
    const ep = new NotificationEndpoint(
      config(),
      driver,
      '/q/adopt',
      quiet,
      async (_u, _h, body) => {
        ids.push(...(JSON.parse(body) as { events: RegistryEvent[] }).events.map((e) => e.id));
        return 200;
      },
      50,
    );
    await ep.start();
    await ep.enqueue(event(4));
    await until('four deliveries', () => ep.delivered === 4);
    assert.deepEqual(ids, ['id-1', 'id-2', 'id-3', 'id-4']);
    // The adopted directory is gone once empty.
    assert.deepEqual(
      (await readdir(join(root, 'q/adopt'))).filter((n) => n.startsWith('deadhost')),
      [],
    );
    // A queue left while it runs is found by its next look.
    const later = join(root, 'q/adopt/deadhost-2-0000');
    await mkdir(later, { recursive: true });
    await writeFile(join(later, `${'7'.padStart(16, '0')}.json`), JSON.stringify(event(7)));
    await until('the later queue', () => ep.delivered === 5);
    await ep.stop();
    assert.deepEqual(ids, ['id-1', 'id-2', 'id-3', 'id-4', 'id-7']);
    assert.deepEqual(await readdir(join(root, 'q/adopt')), []);
  });

  it('wants(): ignore.actions and ignored media types', () => {
    const ep = new NotificationEndpoint(
      config({ ignoredActions: ['pull'], ignoredMediaTypes: ['application/octet-stream'] }),
      driver,
      '/q/filter',
      quiet,
    );
    assert.equal(ep.wants(event(1, 'pull', 'application/vnd.oci.image.manifest.v1+json')), false);
    assert.equal(ep.wants(event(1, 'push', 'application/octet-stream')), false);
    assert.equal(ep.wants(event(1, 'push', 'application/vnd.oci.image.manifest.v1+json')), true);
    assert.equal(ep.wants({ ...event(1, 'delete'), target: { repository: 'r', tag: 't' } }), true);
  });

  it('queue directory names keep safe characters', () => {
    assert.equal(queueDirName('hook_1-a'), 'hook_1-a');
    assert.equal(queueDirName('a/b c'), 'a.2fb.20c');
  });
});

describe('notifications and proxy configuration', () => {
  it('reads endpoints with distribution’s defaults, leaves disabled ones out', () => {
    const c = configFromObject({
      notifications: {
        endpoints: [
          { name: 'a', url: 'http://x/events', headers: { Authorization: 'Bearer t', X: ['1', '2'] } },
          { name: 'b', url: 'http://y/', disabled: true },
          {
            name: 'c',
            url: 'https://z/',
            timeout: '500ms',
            threshold: 5,
            backoff: '3s',
            ignoredmediatypes: ['m1'],
            ignore: { mediatypes: ['m2'], actions: ['pull'] },
          },
        ],
      },
    });
    assert.deepEqual(c.notifications.endpoints, [
      {
        name: 'a',
        url: 'http://x/events',
        headers: { Authorization: ['Bearer t'], X: ['1', '2'] },
        timeoutMs: 1000,
        threshold: 10,
        backoffMs: 1000,
        ignoredMediaTypes: [],
        ignoredActions: [],
      },
      {
        name: 'c',
        url: 'https://z/',
        headers: {},
        timeoutMs: 500,
        threshold: 5,
        backoffMs: 3000,
        ignoredMediaTypes: ['m1', 'm2'],
        ignoredActions: ['pull'],
      },
    ]);
    assert.throws(() => configFromObject({ notifications: { endpoints: [{ name: 'x' }] } }), ConfigError);
    assert.throws(() => configFromObject({ notifications: { endpoints: {} } }), ConfigError);
  });

  it('reads the proxy section (ttl 168h by default) and refuses a remoteurl that is not http(s)', () => {
    assert.deepEqual(configFromObject({ proxy: { remoteurl: 'https://registry-1.docker.io' } }).proxy, {
      remoteurl: 'https://registry-1.docker.io',
      username: undefined,
      password: undefined,
      ttlMs: 168 * 3_600_000,
    });
    assert.equal(configFromObject({ proxy: { remoteurl: 'http://u', ttl: '10m' } }).proxy?.ttlMs, 600_000);
    assert.throws(() => configFromObject({ proxy: { remoteurl: 'ftp://x' } }), ConfigError);
    assert.equal(configFromObject({}).proxy, undefined);
  });
});
