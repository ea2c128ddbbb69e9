import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogBroker, type LogStreamMessage } from '../../../../../src/engine/swarm/logs/log-broker.js';
import type { AgentLogLine } from '../../../../../src/engine/swarm/logs/logs.types.js';

const line = (task: string, text: string): AgentLogLine => ({
  Task: task,
  Stream: 'stdout',
  Time: '2026-11-28T09:00:00.000000001Z',
  Data: Buffer.from(`${text}\n`).toString('base64'),
});

const options = { Follow: false, Stdout: true, Stderr: true };

describe('LogBroker', () => {
  it('sends a subscription down the node’s stream and ends once the node is done', async () => {
    let n = 0;
    const broker = new LogBroker(60_000, () => `sub${++n}`);
    const sent: LogStreamMessage[] = [];
    broker.attach('node1', (m) => sent.push(m));
    const got: string[] = [];
    const done = broker.subscribe(
      new Map([
        ['node1', ['t1', 't2']],
        ['node2', ['t3']],
      ]),
      { ...options, Tail: 1 },
      (node, lines) => got.push(...lines.map((l) => `${node} ${l.Task} ${Buffer.from(l.Data, 'base64')}`)),
      () => {},
      new AbortController().signal,
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(sent, [
      {
        type: 'logs',
        subscription: { ID: 'sub1', Tasks: ['t1', 't2'], Follow: false, Stdout: true, Stderr: true, Tail: 1 },
      },
    ]);
    assert.deepEqual(broker.publish('node1', 'sub1', { Lines: [line('t1', 'a'), line('t2', 'b')] }), {
      Active: true,
    });
    assert.throws(() => broker.publish('node3', 'sub1', { Lines: [] }), /was not asked/);
    assert.deepEqual(broker.publish('node1', 'sub1', { Lines: [], Done: true }), { Active: false });
    // node2 has no stream here (and no relay): not waited for, named
    assert.deepEqual(await done, { unreachable: ['node2'] });
    assert.deepEqual(got, ['node1 t1 a\n', 'node1 t2 b\n']);
    assert.deepEqual(sent.at(-1), { type: 'logs-end', ID: 'sub1' });
    assert.deepEqual(broker.publish('node1', 'sub1', { Lines: [line('t1', 'late')] }), { Active: false });
  });

  it('following: goes on after a node’s Done, until the client leaves', async () => {
    const broker = new LogBroker(60_000, () => 'f');
    const sent: LogStreamMessage[] = [];
    broker.attach('node1', (m) => sent.push(m));
    const ac = new AbortController();
    let over = false;
    const done = broker
      .subscribe(
        new Map([['node1', ['t1']]]),
        { ...options, Follow: true },
        () => {},
        () => {},
        ac.signal,
      )
      .then(() => {
        over = true;
      });
    await new Promise((r) => setImmediate(r));
    broker.publish('node1', 'f', { Lines: [], Done: true });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(over, false);
    ac.abort();
    await done;
    assert.deepEqual(sent.at(-1), { type: 'logs-end', ID: 'f' });
  });

  it('a node whose stream goes is not waited for', async () => {
    const broker = new LogBroker(60_000, () => 'd');
    const detach = broker.attach('node1', () => {});
    const done = broker.subscribe(
      new Map([['node1', ['t1']]]),
      options,
      () => {},
      () => {},
      new AbortController().signal,
    );
    await new Promise((r) => setImmediate(r));
    detach();
    assert.deepEqual(await done, { unreachable: [] });
    assert.equal(broker.connected('node1'), false);
  });

  it('a silent node is given up after the silence limit', async () => {
    const broker = new LogBroker(50, () => 's');
    broker.attach('node1', () => {});
    // the broker's own timer does not hold the process open (an engine's server does)
    const hold = setTimeout(() => {}, 5000);
    const started = Date.now();
    await broker.subscribe(
      new Map([['node1', ['t1']]]),
      options,
      () => {},
      () => {},
      new AbortController().signal,
    );
    clearTimeout(hold);
    assert.ok(Date.now() - started >= 50);
  });
});
