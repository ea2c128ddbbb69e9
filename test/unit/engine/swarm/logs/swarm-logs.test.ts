import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { LogBroker, type LogStreamMessage } from '../../../../../src/engine/swarm/logs/log-broker.js';
import { SwarmLogs } from '../../../../../src/engine/swarm/logs/swarm-logs.js';
import type { Task, TaskState } from '../../../../../src/engine/swarm/tasks/task.types.js';

function task(id: string, state: TaskState, container = state === 'running'): Task {
  return {
    ID: id,
    Version: { Index: 1 },
    CreatedAt: '',
    UpdatedAt: '',
    Labels: {},
    Spec: {},
    ServiceID: 'svc',
    NodeID: 'node1',
    Status: {
      Timestamp: '',
      State: state,
      Message: '',
      ...(container ? { ContainerStatus: { ContainerID: `c-${id}` } } : {}),
    },
    DesiredState: 'running',
  };
}

const line = (t: string, text: string) => ({
  Task: t,
  Stream: 'stdout' as const,
  Time: '2026-11-28T09:00:00.000000001Z',
  Data: Buffer.from(`${text}\n`).toString('base64'),
});

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (ok()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('SwarmLogs following a service', () => {
  it('subscribes to the tasks that get a container later, on the same stream', async () => {
    let n = 0;
    const broker = new LogBroker(60_000, () => `sub${++n}`);
    const sent: LogStreamMessage[] = [];
    broker.attach('node1', (m) => sent.push(m));
    const tasks = [task('t1', 'running'), task('t2', 'preparing')];
    const logs = new SwarmLogs({
      tasks: {
        list: async () => tasks,
        inspect: async () => tasks[0] as Task,
      },
      broker: async () => broker,
      log: new Logger('error'),
      followPollMs: 10,
    });
    const ac = new AbortController();
    const stream = await logs.service('svc', {
      stdout: true,
      stderr: true,
      timestamps: false,
      follow: true,
      details: false,
      signal: ac.signal,
    });
    const got: string[] = [];
    const reading = (async () => {
      for await (const batch of stream.batches) for (const c of batch) got.push(c.data.toString().trim());
    })();
    const subs = () => sent.flatMap((m) => (m.type === 'logs' ? [m.subscription] : []));
    await until('the first subscription', () => subs().length === 1);
    // the task without a container yet is not asked for
    assert.deepEqual(subs()[0]?.Tasks, ['t1']);
    broker.publish('node1', 'sub1', { Lines: [line('t1', 'one')] });

    // t2 starts, t3 is added (a scale-up): both join
    tasks[1] = task('t2', 'running');
    tasks.push(task('t3', 'starting', true));
    await until('a second subscription', () => subs().length === 2);
    assert.deepEqual(subs()[1]?.Tasks, ['t2', 't3']);
    assert.equal(subs()[1]?.Follow, true);
    broker.publish('node1', 'sub2', { Lines: [line('t3', 'three'), line('t2', 'two')] });
    await until('the new tasks’ lines', () => got.length === 3);
    assert.deepEqual(got, ['one', 'three', 'two']);
    // nothing asked twice
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(subs().length, 2);

    ac.abort();
    await reading;
    const ends = sent.filter((m) => m.type === 'logs-end').map((m) => (m as { ID: string }).ID);
    assert.deepEqual(ends.sort(), ['sub1', 'sub2']);
  });

  it('does not poll without follow: the stream ends when the nodes are done', async () => {
    const broker = new LogBroker(60_000, () => 'only');
    broker.attach('node1', () => {});
    let lists = 0;
    const logs = new SwarmLogs({
      tasks: {
        list: async () => {
          lists++;
          return [task('t1', 'running')];
        },
        inspect: async () => task('t1', 'running'),
      },
      broker: async () => broker,
      log: new Logger('error'),
      followPollMs: 5,
    });
    const stream = await logs.service('svc', {
      stdout: true,
      stderr: true,
      timestamps: false,
      follow: false,
      details: false,
      signal: new AbortController().signal,
    });
    await new Promise((r) => setImmediate(r));
    broker.publish('node1', 'only', { Lines: [line('t1', 'x')], Done: true });
    const got: string[] = [];
    for await (const batch of stream.batches) for (const c of batch) got.push(c.data.toString().trim());
    assert.deepEqual(got, ['x']);
    assert.equal(lists, 1);
  });
});
