import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import { StatusReporter } from '../../../../../src/engine/swarm/agent/status-reporter.js';
import type { StatusCall } from '../../../../../src/engine/swarm/cluster-api/assignments.types.js';
import type { TaskState } from '../../../../../src/engine/swarm/tasks/task.types.js';
import { eventually } from '../../../../helpers/eventually.js';

const status = (State: TaskState) => ({ Timestamp: 't', State, Message: State });

describe('status reporter', () => {
  it('keeps reports while no manager takes them, sends the latest per task, never one behind', async () => {
    const calls: StatusCall[] = [];
    let up = false;
    const reporter = new StatusReporter(
      async (call) => {
        if (!up) throw new Error('no manager');
        calls.push(call);
        return { Applied: call.Updates.map((u) => u.TaskID) };
      },
      new Logger('error'),
      20,
    );
    reporter.report('t1', status('accepted'));
    reporter.report('t1', status('running'));
    reporter.report('t1', status('starting'));
    reporter.report('t2', status('failed'));
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(reporter.waiting, 2);
    up = true;
    await eventually('the reports go', () => reporter.waiting === 0 && calls.length > 0);
    assert.deepEqual(calls.flatMap((c) => c.Updates.map((u) => `${u.TaskID} ${u.Status.State}`)).sort(), [
      't1 running',
      't2 failed',
    ]);
    reporter.stop();
  });

  it('says a task unhealthy with its report until a manager took it', async () => {
    const calls: StatusCall[] = [];
    let up = false;
    const reporter = new StatusReporter(
      async (call) => {
        if (!up) throw new Error('no manager');
        calls.push(call);
        return { Applied: call.Updates.map((u) => u.TaskID) };
      },
      new Logger('error'),
      20,
    );
    let taken = false;
    void reporter.reportUnhealthy('t1', status('running')).then(() => {
      taken = true;
    });
    reporter.report('t2', status('running'));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(taken, false, 'no manager took it yet');
    up = true;
    await eventually('the reports go', () => reporter.waiting === 0 && calls.length > 0);
    const updates = calls.flatMap((c) => c.Updates);
    assert.deepEqual(updates.map((u) => `${u.TaskID} ${u.Status.State} ${u.Unhealthy === true}`).sort(), [
      't1 running true',
      't2 running false',
    ]);
    // said once: the task's next report goes without it
    reporter.report('t1', status('failed'));
    await eventually('the next report goes', () => calls.flatMap((c) => c.Updates).length === 3);
    assert.equal(calls.at(-1)?.Updates[0]?.Unhealthy, undefined);
    reporter.stop();
  });
});
