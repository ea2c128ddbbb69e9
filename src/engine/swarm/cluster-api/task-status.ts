import { keys } from '../keys.js';
import type { ClusterStore } from '../store/cluster-store.js';
import { type StoredTask, stateRank, TASK_STATES, type TaskStatus } from '../tasks/task.types.js';
import type { StatusAnswer, StatusCall, StatusReport } from './assignments.types.js';

/**
 * Agents' task state reports, applied forward only: a report is written only when its state
 * ranks above the task's (task.types.ts' order), by a compare-and-swap on the task's revision,
 * so a late, older report never moves a task back, and a concurrent write (the orchestrator's)
 * is read again rather than overwritten. A node reports only its own tasks. A report that the
 * task's container turned unhealthy marks the task (`_.unhealthy`) whatever its state.
 */

const ATTEMPTS = 5;

/** A report's status as stored: only the fields of TaskStatus, the state checked. */
function cleanStatus(s: TaskStatus): TaskStatus | undefined {
  if (!s || typeof s !== 'object' || !(TASK_STATES as readonly string[]).includes(s.State)) return undefined;
  const out: TaskStatus = {
    Timestamp: typeof s.Timestamp === 'string' ? s.Timestamp : new Date().toISOString(),
    State: s.State,
    Message: typeof s.Message === 'string' ? s.Message : '',
  };
  if (typeof s.Err === 'string' && s.Err !== '') out.Err = s.Err;
  if (s.ContainerStatus && typeof s.ContainerStatus === 'object') {
    const c = s.ContainerStatus;
    out.ContainerStatus = {
      ...(typeof c.ContainerID === 'string' ? { ContainerID: c.ContainerID } : {}),
      ...(typeof c.PID === 'number' ? { PID: c.PID } : {}),
      ...(typeof c.ExitCode === 'number' ? { ExitCode: c.ExitCode } : {}),
    };
  }
  if (s.PortStatus && typeof s.PortStatus === 'object' && Array.isArray(s.PortStatus.Ports)) {
    out.PortStatus = { Ports: s.PortStatus.Ports };
  }
  return out;
}

/** Applies one report; true when the task now carries it. */
export async function applyStatusReport(
  store: ClusterStore,
  nodeId: string,
  report: StatusReport,
  now: () => Date,
): Promise<boolean> {
  const status = cleanStatus(report.Status);
  if (!status || typeof report.TaskID !== 'string' || report.TaskID === '' || report.TaskID.includes('/'))
    return false;
  const key = keys.task(report.TaskID);
  for (let i = 0; i < ATTEMPTS; i++) {
    const kv = await store.get(key);
    if (!kv) return false;
    const task = JSON.parse(kv.value) as StoredTask;
    if (task.NodeID !== nodeId) return false;
    const forward = stateRank(status.State) > stateRank(task.Status.State);
    const unhealthy = report.Unhealthy === true && task._.unhealthy !== true;
    if (!forward && !unhealthy) return false;
    // what the agent did not say (port status of an earlier report) is kept
    const next: StoredTask = {
      ...task,
      UpdatedAt: now().toISOString(),
      ...(unhealthy ? { _: { ...task._, unhealthy: true } } : {}),
      Status: forward
        ? {
            ...status,
            ...(status.PortStatus
              ? {}
              : task.Status.PortStatus
                ? { PortStatus: task.Status.PortStatus }
                : {}),
          }
        : task.Status,
    };
    const res = await store.txn(
      [{ key, target: 'mod', op: 'equal', value: kv.modRevision }],
      [{ put: { key, value: JSON.stringify(next) } }],
    );
    if (res.succeeded) return true;
  }
  return false;
}

/** A batch of reports, in order (a task's later report after its earlier one). */
export async function applyStatusCall(
  store: ClusterStore,
  nodeId: string,
  call: StatusCall,
  now: () => Date,
): Promise<StatusAnswer> {
  const applied: string[] = [];
  for (const report of Array.isArray(call.Updates) ? call.Updates : []) {
    if (await applyStatusReport(store, nodeId, report, now)) applied.push(report.TaskID);
  }
  return { Applied: applied };
}
