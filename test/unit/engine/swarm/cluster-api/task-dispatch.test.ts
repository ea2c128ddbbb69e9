import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '../../../../../src/common/log.js';
import { isAssigned, TaskDispatch } from '../../../../../src/engine/swarm/cluster-api/assignments.js';
import type { AssignmentMessage } from '../../../../../src/engine/swarm/cluster-api/assignments.types.js';
import { applyStatusCall } from '../../../../../src/engine/swarm/cluster-api/task-status.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import { newDek, seal } from '../../../../../src/engine/swarm/seal.js';
import { objectKeys } from '../../../../../src/engine/swarm/secrets/object-keys.js';
import { defaultSpec } from '../../../../../src/engine/swarm/spec.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';
import type { StoredTask, TaskState } from '../../../../../src/engine/swarm/tasks/task.types.js';

const now = () => new Date('2026-11-28T00:00:00Z');

function task(id: string, over: Partial<StoredTask> = {}): StoredTask {
  return {
    ID: id,
    CreatedAt: '',
    UpdatedAt: '',
    Labels: {},
    Spec: { ContainerSpec: { Image: 'busybox' } },
    ServiceID: 'svc1',
    Slot: 1,
    NodeID: 'n1',
    Status: { Timestamp: '', State: 'assigned', Message: '' },
    DesiredState: 'running',
    _: { specVersion: 1, serviceName: 'web' },
    ...over,
  };
}

const status = (State: TaskState, extra = {}) => ({ Timestamp: 't', State, Message: State, ...extra });

describe('task state reports (forward only)', () => {
  it('applies a report only when it moves the task forward, for the task of the reporting node', async () => {
    const store = new MemoryStore();
    await store.put(keys.task('t1'), JSON.stringify(task('t1')));
    await store.put(keys.task('t2'), JSON.stringify(task('t2', { NodeID: 'other' })));
    const first = await applyStatusCall(
      store,
      'n1',
      {
        Updates: [
          { TaskID: 't1', Status: status('preparing') },
          { TaskID: 't1', Status: status('running', { ContainerStatus: { ContainerID: 'c1', PID: 42 } }) },
          { TaskID: 't2', Status: status('running') },
          { TaskID: 'nope', Status: status('running') },
        ],
      },
      now,
    );
    assert.deepEqual(first.Applied, ['t1', 't1']);
    const t1 = JSON.parse((await store.get(keys.task('t1')))?.value ?? '{}') as StoredTask;
    assert.equal(t1.Status.State, 'running');
    assert.deepEqual(t1.Status.ContainerStatus, { ContainerID: 'c1', PID: 42 });
    assert.equal(t1.UpdatedAt, '2026-11-28T00:00:00.000Z');
    assert.equal(JSON.parse((await store.get(keys.task('t2')))?.value ?? '{}').Status.State, 'assigned');

    // a late, older report changes nothing; neither does one of the same state or a bad state
    const late = await applyStatusCall(
      store,
      'n1',
      {
        Updates: [
          { TaskID: 't1', Status: status('starting') },
          { TaskID: 't1', Status: status('running') },
          { TaskID: 't1', Status: status('bogus' as TaskState) },
        ],
      },
      now,
    );
    assert.deepEqual(late.Applied, []);
    const failed = await applyStatusCall(
      store,
      'n1',
      { Updates: [{ TaskID: 't1', Status: status('failed', { Err: 'task: non-zero exit (1)' }) }] },
      now,
    );
    assert.deepEqual(failed.Applied, ['t1']);
    const after = JSON.parse((await store.get(keys.task('t1')))?.value ?? '{}') as StoredTask;
    assert.equal(after.Status.Err, 'task: non-zero exit (1)');
    // the rest of the task is as it was (private fields too)
    assert.deepEqual(after._, { specVersion: 1, serviceName: 'web' });
  });

  it('retries its compare-and-swap when the task changed under it, and keeps that change', async () => {
    const store = new MemoryStore();
    await store.put(keys.task('t1'), JSON.stringify(task('t1')));
    const realTxn = store.txn.bind(store);
    let raced = false;
    store.txn = async (compares, success, failure) => {
      if (!raced) {
        raced = true;
        // the orchestrator writes desired shutdown between the read and the write
        await store.put(keys.task('t1'), JSON.stringify(task('t1', { DesiredState: 'shutdown' })));
      }
      return realTxn(compares, success, failure);
    };
    const res = await applyStatusCall(
      store,
      'n1',
      { Updates: [{ TaskID: 't1', Status: status('running') }] },
      now,
    );
    assert.deepEqual(res.Applied, ['t1']);
    const t1 = JSON.parse((await store.get(keys.task('t1')))?.value ?? '{}') as StoredTask;
    assert.equal(t1.Status.State, 'running');
    assert.equal(t1.DesiredState, 'shutdown');
  });
});

describe('assignments', () => {
  it('holds a node its tasks from assigned on, until deleted', () => {
    assert.equal(isAssigned(task('a'), 'n1'), true);
    assert.equal(isAssigned(task('a'), 'n2'), false);
    assert.equal(isAssigned(task('a', { Status: status('pending') }), 'n1'), false);
    assert.equal(isAssigned(task('a', { Status: status('failed') }), 'n1'), true);
    assert.equal(isAssigned(task('a', { DesiredState: 'shutdown' }), 'n1'), true);
    // a finished task stays (its stopped container kept for its logs) until the reaper deletes it
    assert.equal(isAssigned(task('a', { DesiredState: 'shutdown', Status: status('shutdown') }), 'n1'), true);
  });

  it('streams the full set with only the referenced secrets, then the changes', async () => {
    const store = new MemoryStore();
    const dek = newDek();
    await store.put(keys.cluster, JSON.stringify({ Spec: defaultSpec() }));
    await store.put(keys.node('n1'), '{}');
    const secrets = objectKeys('secret');
    const putSecret = (id: string, name: string, data: string) =>
      store.put(
        secrets.object(id),
        JSON.stringify({ ID: id, Spec: { Name: name, Labels: {} }, _: { data: seal(dek, data) } }),
      );
    await putSecret('sec1', 's1', Buffer.from('one').toString('base64'));
    await putSecret('sec2', 's2', Buffer.from('two').toString('base64'));
    await putSecret('sec3', 's3', Buffer.from('three').toString('base64'));
    await store.put(
      keys.service('svc1'),
      JSON.stringify({
        ID: 'svc1',
        Spec: {
          Name: 'web',
          Labels: { l: '1' },
          EndpointSpec: { Ports: [{ TargetPort: 80, PublishMode: 'host' }, { TargetPort: 81 }] },
        },
        Endpoint: {},
        _: { specVersion: 1, registryAuth: 'auth' },
      }),
    );
    const withSecret = (id: string, secretId: string, over: Partial<StoredTask> = {}) =>
      task(id, {
        Spec: { ContainerSpec: { Image: 'busybox', Secrets: [{ SecretID: secretId, SecretName: 'x' }] } },
        ...over,
      });
    await store.put(keys.task('t1'), JSON.stringify(withSecret('t1', 'sec1')));
    await store.put(keys.task('t2'), JSON.stringify(withSecret('t2', 'sec2', { NodeID: 'n2' })));

    const dispatch = new TaskDispatch(store, dek, new Logger('error'), now, async () => [
      { NodeID: 'm1', Addr: '10.0.0.1:2377' },
    ]);
    const got: AssignmentMessage[] = [];
    const ac = new AbortController();
    const streaming = dispatch.assignments('n1', (m) => got.push(m), ac.signal);
    for (let i = 0; i < 100 && got.length === 0; i++) await sleep(5);
    const full = got[0];
    assert.ok(full?.type === 'full');
    assert.deepEqual(
      full.tasks.map((t) => t.Task.ID),
      ['t1'],
    );
    assert.ok(!('_' in (full.tasks[0]?.Task ?? {})), 'private fields stay on the manager');
    assert.deepEqual(full.tasks[0]?.Service, {
      ID: 'svc1',
      Name: 'web',
      Labels: { l: '1' },
      HostPorts: [{ TargetPort: 80, PublishMode: 'host' }],
      RegistryAuth: 'auth',
    });
    assert.deepEqual(full.secrets, [{ ID: 'sec1', Name: 's1', Data: Buffer.from('one').toString('base64') }]);
    assert.deepEqual(full.managers, [{ NodeID: 'm1', Addr: '10.0.0.1:2377' }]);
    assert.equal(full.periodMs, 5000);

    // a new task of the node brings its secret; the old one's shutdown, reported, releases sec1
    // (t1 stays, for its container's logs), its deletion takes t1 away
    await store.put(keys.task('t3'), JSON.stringify(withSecret('t3', 'sec3')));
    await store.put(
      keys.task('t1'),
      JSON.stringify(withSecret('t1', 'sec1', { DesiredState: 'shutdown', Status: status('shutdown') })),
    );
    await store.put(keys.task('t2'), JSON.stringify(withSecret('t2', 'sec2', { NodeID: 'n2', Slot: 2 })));
    for (let i = 0; i < 100 && got.length < 3; i++) await sleep(5);
    const [, added, over] = got;
    assert.ok(added?.type === 'changes' && over?.type === 'changes');
    assert.deepEqual(
      added.tasks.map((t) => t.Task.ID),
      ['t3'],
    );
    assert.deepEqual(
      added.secrets.map((s) => s.ID),
      ['sec3'],
    );
    assert.deepEqual(
      over.tasks.map((t) => t.Task.Status.State),
      ['shutdown'],
    );
    assert.deepEqual(over.removed, []);
    assert.deepEqual(over.removedSecrets, ['sec1']);
    assert.equal(got.length, 3, `another node’s task is not sent: ${JSON.stringify(got.slice(3))}`);
    await store.delete(keys.task('t1'));
    for (let i = 0; i < 100 && got.length < 4; i++) await sleep(5);
    const removed = got[3];
    assert.ok(removed?.type === 'changes', JSON.stringify(got.slice(3)));
    assert.deepEqual(removed.removed, ['t1']);
    assert.deepEqual(removed.removedSecrets, []);
    ac.abort();
    await streaming;
  });

  it('refuses a node that is not in the swarm', async () => {
    const store = new MemoryStore();
    const dispatch = new TaskDispatch(store, newDek(), new Logger('error'), now, async () => []);
    await assert.rejects(
      dispatch.assignments('ghost', () => {}, new AbortController().signal),
      /not a member/,
    );
  });
});
