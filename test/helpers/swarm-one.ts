import { ensureBusybox } from './busybox.js';
import { type EngineOptions, TestEngine } from './engine.js';
import { freePort, initLoopbackSwarm } from './swarm-etcd.js';

/** What the tests read of a task from `GET /tasks`. */
export interface TaskView {
  ID: string;
  Slot?: number;
  NodeID?: string;
  DesiredState: string;
  Status: { State: string; Err?: string; ContainerStatus?: { ContainerID?: string } };
}

/**
 * One engine with the busybox image, the only manager of a loopback swarm (its etcd peer port and
 * cluster API on free ports). `bridge` as TestEngine's (`none` where no task needs a network).
 */
export async function startOneManagerSwarm(
  opts: Pick<EngineOptions, 'bridge'> = {},
): Promise<{ engine: TestEngine; nodeId: string }> {
  const engine = await TestEngine.start({
    ...opts,
    args: ['--swarm-etcd-peer-port', String(await freePort())],
  });
  try {
    await ensureBusybox(engine);
    return { engine, nodeId: await initLoopbackSwarm(engine) };
  } catch (err) {
    await engine.destroy();
    throw err;
  }
}

/** Leaves the swarm (forced, whatever its state) and ends the engine. */
export async function leaveAndDestroy(engine: TestEngine | undefined): Promise<void> {
  await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
  await engine?.destroy();
}

/** The tasks of `service` (name or ID); none while the manager does not answer 200. */
export async function serviceTasks(engine: TestEngine, service: string): Promise<TaskView[]> {
  const filters = encodeURIComponent(JSON.stringify({ service: [service] }));
  const res = await engine.request('GET', `/tasks?filters=${filters}`);
  return res.status === 200 ? res.json<TaskView[]>() : [];
}

/** The tasks of `service` meant to run and running. */
export async function runningTasks(engine: TestEngine, service: string): Promise<TaskView[]> {
  return (await serviceTasks(engine, service)).filter(
    (t) => t.DesiredState === 'running' && t.Status.State === 'running',
  );
}
