import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTimestamp } from '../../../../src/engine/api/events.routes.js';
import { eventRecord, eventShown, eventsContentType } from '../../../../src/engine/api/events.versions.js';
import { eventFilter } from '../../../../src/engine/events/events.filter.js';
import { EventsService, eventJson } from '../../../../src/engine/events/events.service.js';
import { frameRecord, matchAcceptStrict } from '../../../../src/http/json-records.js';
import { parseFilters } from '../../../../src/http/query.js';

const filter = (json: string) => eventFilter(parseFilters(json));

describe('events service', () => {
  it('publishes events in the newest API form (no legacy keys on the bus)', () => {
    const bus = new EventsService();
    const e = bus.publish('container', 'start', 'abc', { image: 'busybox', name: 'x' });
    assert.deepEqual(Object.keys(e), ['Type', 'Action', 'Actor', 'scope', 'time', 'timeNano']);
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

describe('events by API version', () => {
  const bus = new EventsService();
  const start = bus.publish('container', 'start', 'abc', { image: 'busybox', name: 'x' });
  const tag = bus.publish('image', 'tag', 'sha256:1', { name: 'a:latest' });
  const pruned = bus.publish('image', 'prune', '', { reclaimed: '0' });
  const net = bus.publish('network', 'connect', 'net1', { container: 'abc', name: 'bridge', type: 'bridge' });
  const keys = (line: string) => Object.keys(JSON.parse(line));

  it('adds the legacy status, id and from keys below 1.52, in dockerd order', () => {
    assert.deepEqual(keys(eventRecord(start, '1.41')), [
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
    const legacy = JSON.parse(eventRecord(start, '1.51'));
    assert.equal(legacy.status, 'start');
    assert.equal(legacy.id, 'abc');
    assert.equal(legacy.from, 'busybox');
    // images: no from; an empty ID (prune) left out, as dockerd 20.10
    assert.deepEqual(keys(eventRecord(tag, '1.44')).slice(0, 3), ['status', 'id', 'Type']);
    assert.deepEqual(keys(eventRecord(pruned, '1.44')).slice(0, 2), ['status', 'Type']);
    // other types never had them
    assert.equal(keys(eventRecord(net, '1.41'))[0], 'Type');
    // from 1.52: none, and timeNano still the exact integer
    assert.deepEqual(keys(eventRecord(start, '1.52')), [
      'Type',
      'Action',
      'Actor',
      'scope',
      'time',
      'timeNano',
    ]);
    assert.match(eventRecord(start, '1.52'), new RegExp(`"timeNano":${start.timeNano}}$`));
    assert.match(eventRecord(start, '1.41'), new RegExp(`"timeNano":${start.timeNano}}$`));
  });

  it('leaves image create events out below 1.46', () => {
    const create = bus.publish('image', 'create', 'sha256:2', { name: 'sha256:2' });
    assert.equal(eventShown(create, '1.45'), false);
    assert.equal(eventShown(create, '1.46'), true);
    assert.equal(eventShown(tag, '1.24'), true);
    assert.equal(eventShown(bus.publish('container', 'create', 'c', {}), '1.41'), true);
  });

  it('negotiates the stream type: json below 1.52, jsonl from 1.52, an exact Accept at any version', () => {
    assert.equal(eventsContentType(undefined, '1.51'), 'application/json');
    assert.equal(eventsContentType(undefined, '1.52'), 'application/jsonl');
    assert.equal(eventsContentType(['*/*'], '1.52'), 'application/jsonl');
    assert.equal(eventsContentType(['application/*'], '1.41'), 'application/json');
    assert.equal(eventsContentType(['application/x-ndjson'], '1.41'), 'application/x-ndjson');
    assert.equal(eventsContentType(['application/json-seq'], '1.56'), 'application/json-seq');
    assert.equal(eventsContentType(['application/jsonl'], '1.24'), 'application/jsonl');
    assert.equal(eventsContentType(['application/json'], '1.56'), 'application/jsonl');
    // q-values: the highest wins, q=0 is a refusal, ties go to the first offer
    assert.equal(
      matchAcceptStrict(
        ['application/json-seq;q=0.9, application/x-ndjson;q=0.5'],
        ['application/jsonl', 'application/x-ndjson', 'application/json-seq'],
      ),
      'application/json-seq',
    );
    assert.equal(matchAcceptStrict(['application/jsonl;q=0'], ['application/jsonl']), undefined);
    assert.equal(
      matchAcceptStrict(
        ['application/json-seq, application/jsonl'],
        ['application/jsonl', 'application/json-seq'],
      ),
      'application/jsonl',
    );
    // gddo stops reading a value at a parameter other than q
    assert.equal(
      matchAcceptStrict(['text/plain;charset=utf-8, application/jsonl'], ['application/jsonl']),
      undefined,
    );
    assert.equal(matchAcceptStrict([''], ['application/jsonl']), undefined);
  });

  it('frames json-seq records with the record separator', () => {
    assert.equal(frameRecord('application/json-seq', '{}'), '\x1e{}\n');
    assert.equal(frameRecord('application/jsonl', '{}'), '{}\n');
    assert.equal(frameRecord('application/json', '{}'), '{}\n');
  });
});
