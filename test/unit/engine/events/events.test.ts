import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTimestamp } from '../../../../src/engine/api/events.routes.js';
import { eventFilter } from '../../../../src/engine/events/events.filter.js';
import { EventsService, eventJson } from '../../../../src/engine/events/events.service.js';
import { parseFilters } from '../../../../src/http/query.js';

const filter = (json: string) => eventFilter(parseFilters(json));

describe('events service', () => {
  it('fills legacy fields for container events in dockerd order', () => {
    const bus = new EventsService();
    const e = bus.publish('container', 'start', 'abc', { image: 'busybox', name: 'x' });
    assert.deepEqual(Object.keys(e), [
      'status',
      'id',
      'from',
      'Type',
      'Action',
      'Actor',
      'scope',
      'time',
      'timeNano',
    ]);
    assert.equal(e.from, 'busybox');
    const n = bus.publish('network', 'connect', 'net1', { container: 'abc', name: 'bridge', type: 'bridge' });
    assert.equal(n.status, undefined);
    assert.equal(n.id, undefined);
  });

  it('keeps strictly increasing timestamps and replays history by time', () => {
    const bus = new EventsService();
    const a = bus.publish('image', 'tag', 'sha256:1', { name: 'a:latest' });
    const b = bus.publish('image', 'untag', 'sha256:1', { name: 'a:latest' });
    assert.ok(b.timeNano > a.timeNano);
    assert.deepEqual(bus.past(b.timeNano), [b]);
    assert.deepEqual(bus.past(0n, a.timeNano), [a]);
  });

  it('writes timeNano as the exact integer', () => {
    const e = new EventsService().publish('image', 'tag', 'sha256:1', { name: 'a:latest' });
    e.timeNano = 1795465672160551723n;
    const line = eventJson(e);
    assert.match(line, /,"time":\d+,"timeNano":1795465672160551723}$/);
    assert.equal(JSON.parse(line).Action, 'tag');
  });

  it('filters as dockerd does', () => {
    const bus = new EventsService();
    const start = bus.publish('container', 'start', 'abcdef', {
      image: 'busybox',
      name: 'web',
      tier: 'front',
    });
    const health = bus.publish('container', 'health_status: healthy', 'abcdef', {
      image: 'busybox',
      name: 'web',
    });
    const tag = bus.publish('image', 'tag', 'sha256:99', { name: 'busybox:latest' });
    const tagged = bus.publish('container', 'create', '123456', { image: 'app:v1', name: 'web-2' });
    // container: ID or name, exactly or by prefix; other actors are left out
    assert.ok(filter('{"container":["web"]}')(start));
    assert.ok(filter('{"container":["web"]}')(tagged));
    assert.ok(filter('{"container":["abc"]}')(start));
    assert.ok(!filter('{"container":["web-"]}')(start));
    assert.ok(!filter('{"container":["web"]}')(tag));
    // event: exact, but health_status matches its "health_status: x" actions
    assert.ok(filter('{"event":["health_status"]}')(health));
    assert.ok(!filter('{"event":["health"]}')(health));
    assert.ok(!filter('{"event":["sta"]}')(start));
    // label: every value must match
    assert.ok(filter('{"label":["tier=front"]}')(start));
    assert.ok(filter('{"label":["tier","name=web"]}')(start));
    assert.ok(!filter('{"label":["tier=front","name=other"]}')(start));
    assert.ok(!filter('{"label":["tier=back"]}')(start));
    // image: the name as the event has it, with or without its tag, or the ID
    assert.ok(filter('{"image":["busybox"]}')(start));
    assert.ok(!filter('{"image":["busybox:latest"]}')(start));
    assert.ok(filter('{"image":["app"]}')(tagged));
    assert.ok(filter('{"image":["app:v1"]}')(tagged));
    assert.ok(!filter('{"image":["app:v2"]}')(tagged));
    assert.ok(filter('{"image":["busybox"]}')(tag));
    assert.ok(filter('{"image":["sha256:99"]}')(tag));
    assert.ok(!filter('{"image":["docker.io/library/busybox:latest"]}')(tag));
    assert.ok(filter('{"type":["image"]}')(tag));
    assert.ok(!filter('{"type":["image"]}')(start));
    // what dockerd does not know filters everything out, or nothing, without an error
    assert.ok(!filter('{"type":["weird"]}')(start));
    assert.ok(filter('{"bogus":["x"]}')(start));
  });

  it('parses Docker timestamps', () => {
    assert.equal(parseTimestamp('1700000000', 'since'), 1_700_000_000_000_000_000n);
    assert.equal(parseTimestamp('1700000000.5', 'since'), 1_700_000_000_500_000_000n);
    assert.equal(parseTimestamp('1970-01-01T00:00:01Z', 'since'), 1_000_000_000n);
    assert.equal(parseTimestamp('1700000000.1234567891234', 'since'), 1_700_000_000_123_456_789n);
    assert.throws(() => parseTimestamp('soon', 'since'), /invalid value for since/);
    assert.throws(() => parseTimestamp('10m', 'since'), /invalid value for since/);
  });
});
