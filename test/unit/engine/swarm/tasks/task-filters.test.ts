import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StoredTask } from '../../../../../src/engine/swarm/tasks/task.types.js';
import { filterTasks, taskName } from '../../../../../src/engine/swarm/tasks/task-filters.js';

const task = (id: string, over: Partial<StoredTask> = {}): StoredTask => ({
  ID: id,
  CreatedAt: '',
  UpdatedAt: '',
  Labels: {},
  Spec: {},
  ServiceID: 'svc1',
  Status: { Timestamp: '', State: 'running', Message: '' },
  DesiredState: 'running',
  _: { specVersion: 2, serviceName: 'web' },
  ...over,
});

describe('task filters', () => {
  const tasks = [
    task('aaa', { Slot: 1, NodeID: 'n1', Labels: { x: 'y' } }),
    task('bbb', {
      Slot: 1,
      NodeID: 'n2',
      DesiredState: 'shutdown',
      _: { specVersion: 1, serviceName: 'web' },
    }),
    task('ccc', { NodeID: 'n1', ServiceID: 'svc2', _: { specVersion: 1, serviceName: 'glob' } }),
  ];
  const ids = (f: Record<string, string[]>) =>
    filterTasks(tasks, new Map(Object.entries(f)), {
      currentSpec: (s) => (s === 'svc1' ? 2 : 1),
      serviceLabels: (s) => (s === 'svc2' ? { 'com.docker.stack.namespace': 'app' } : undefined),
    }).map((t) => t.ID);

  it('names tasks as swarmkit does', () => {
    assert.equal(taskName(tasks[0] as StoredTask), 'web.1.aaa');
    assert.equal(taskName(tasks[2] as StoredTask), 'glob.n1.ccc');
  });

  it('filters by each key, values of one key ORed, keys ANDed', () => {
    assert.deepEqual(ids({}), ['aaa', 'bbb', 'ccc']);
    assert.deepEqual(ids({ 'desired-state': ['running'] }), ['aaa', 'ccc']);
    assert.deepEqual(ids({ 'desired-state': ['running', 'shutdown'], node: ['n2'] }), ['bbb']);
    assert.deepEqual(ids({ name: ['web.1'] }), ['aaa', 'bbb']);
    assert.deepEqual(ids({ service: ['svc2'] }), ['ccc']);
    // the service's labels, as swarmkit's ServiceAnnotations (docker stack ps), not the task's own
    assert.deepEqual(ids({ label: ['x=y'] }), []);
    assert.deepEqual(ids({ label: ['com.docker.stack.namespace=app'] }), ['ccc']);
    assert.deepEqual(ids({ label: ['com.docker.stack.namespace'] }), ['ccc']);
    assert.deepEqual(ids({ id: ['b', 'c'] }), ['bbb', 'ccc']);
    assert.deepEqual(ids({ '_up-to-date': ['true'] }), ['aaa', 'ccc']);
    assert.throws(() => ids({ bogus: ['1'] }), /Invalid filter 'bogus'/);
    assert.throws(() => ids({ 'desired-state': ['done'] }), /Invalid desired-state filter: 'done'/);
  });
});
