import { errorMessage, isKind, notFound } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { probeCommand } from '../../containers/core/health.js';
import type { ContainerInspect } from '../../containers/core/views.types.js';
import type { ContainerService } from '../../containers/service.types.js';
import type { ImageResolver, PullOptions } from '../../images/images.types.js';
import type { ServiceLb } from '../../network/lb/lb.types.js';
import type { AssignedObject, AssignedTask } from '../cluster-api/assignments.types.js';
import type { PortConfig } from '../services/service.types.js';
import { isTerminal, stateRank, type TaskState, type TaskStatus } from '../tasks/task.types.js';
import { type NodeFacts, stopTimeoutSeconds, taskContainer } from './container-config.js';
import type { OverlayPort } from './overlay-port.js';
import type { TaskFiles } from './task-files.js';
import type { HealthEvents, HealthStatus } from './task-health.js';

/**
 * The node's task executor: each assigned task becomes a container through the engine's own
 * container service, reported forward in swarmkit's steps and words: accepted → preparing (image,
 * secret and config files, create) → ready ("prepared") → starting → running ("started"); an exit
 * → complete ("finished") or failed with `task: non-zero exit (N)`. An error before starting
 * rejects the task, one after fails it. A desired state of shutdown or beyond stops the container
 * (StopGracePeriod), removes its secret and config files and reports `shutdown`; the stopped
 * container stays (for its logs, as swarmkit keeps a task's container) until the task is no longer
 * this node's (the reaper deleted it): then it goes. One operation at a time per task.
 *
 * A container with a health check (its own or its image's) holds the task in `starting` until
 * it is healthy, as swarmkit's controller does: only then is it `running`, and so a backend of
 * its service's VIP, DNS names and ingress ports (node-overlay.ts takes running tasks only). An
 * unhealthy one leaves its VIPs and names at once (the managers are told before the stop), then
 * is stopped (StopGracePeriod) and fails with
 * `task: non-zero exit (N): dockerexec: unhealthy container`; the orchestrator replaces it.
 */

export type AgentContainers = Pick<
  ContainerService,
  'create' | 'start' | 'stop' | 'remove' | 'inspect' | 'list' | 'wait'
>;

export interface AgentImages {
  resolve: ImageResolver['resolve'];
  /** A pull from the image's registry (absent: a missing image rejects the task). */
  pull?: (opts: PullOptions) => Promise<void>;
}

export interface ExecutorDeps {
  containers: AgentContainers;
  images: AgentImages;
  files: TaskFiles;
  node: () => NodeFacts;
  /** A state this node reached for a task (already forward only: the executor never goes back). */
  report: (taskId: string, status: TaskStatus) => void;
  /**
   * The task's container turned unhealthy (its status as it is): it leaves its VIPs and names now.
   * Resolves once a manager took it.
   */
  reportUnhealthy?: (taskId: string, status: TaskStatus) => Promise<void>;
  /** The node's overlay data plane (absent: tasks on overlay networks get no interfaces there). */
  overlay?: OverlayPort;
  /** The VIP load balancer (absent: VIPs resolve but nothing balances them). */
  lb?: ServiceLb;
  /** The containers' health changes (absent: a health check does not hold a task in `starting`). */
  health?: HealthEvents;
  /** Something worth keeping across an engine restart changed (a run's status or container). */
  changed: () => void;
  log: Logger;
}

/** A task as this node runs it. */
export interface TaskRun {
  assigned: AssignedTask;
  /** The latest status: the manager's or this node's, whichever is further. */
  status: TaskStatus;
  containerId?: string;
}

/** What the executor keeps of a run across an engine restart. */
export type SavedRun = TaskRun;

interface Live extends TaskRun {
  chain: Promise<void>;
  /** Ends the wait on the container's exit. */
  watching?: AbortController;
  /** A shutdown or removal is under way: an exit now is not the task's failure. */
  stopping?: boolean;
  /** The container turned unhealthy and is being stopped: its exit fails the task for that. */
  unhealthy?: boolean;
  /** Ends following the container's health. */
  unwatchHealth?: () => void;
}

const PULL_TIMEOUT_MS = 120_000;

/** swarmkit's exitError: the code, and why when the agent knows (`dockerexec: unhealthy container`). */
export const exitError = (code: number, cause?: string) =>
  cause ? `task: non-zero exit (${code}): ${cause}` : `task: non-zero exit (${code})`;

/** The longest an unhealthy task's stop waits for the managers to take it out of the backends (dockerd's defaultGossipConvergeDelay). */
const GOSSIP_CONVERGE_MS = 2000;

/** moby's ErrContainerUnhealthy (daemon/cluster/executor/container/errors.go). */
const UNHEALTHY = 'dockerexec: unhealthy container';

export class Executor {
  private readonly runs = new Map<string, Live>();
  /** Tasks plugged into overlay networks: their container's process (its namespace). */
  private readonly pids = new Map<string, number>();
  readonly secrets = new Map<string, AssignedObject>();
  readonly configs = new Map<string, AssignedObject>();

  constructor(private readonly deps: ExecutorDeps) {}

  /** The runs, to save (without the registry auth: a pull waits for the manager's set). */
  saved(): SavedRun[] {
    return [...this.runs.values()].map((r) => ({
      assigned: { ...r.assigned, Service: { ...r.assigned.Service, RegistryAuth: undefined } },
      status: r.status,
      ...(r.containerId ? { containerId: r.containerId } : {}),
    }));
  }

  has(taskId: string): boolean {
    return this.runs.has(taskId);
  }

  taskIds(): string[] {
    return [...this.runs.keys()];
  }

  /**
   * A run saved by the last engine: a running task's container is waited on again at once (it
   * kept running meanwhile); the rest waits for the manager's set (and the secrets it brings).
   */
  restore(saved: SavedRun): void {
    const run: Live = { ...saved, chain: Promise.resolve() };
    this.runs.set(saved.assigned.Task.ID, run);
    if (stateRank(run.status.State) >= stateRank('running')) this.drive(run);
  }

  /** A new or changed assignment. */
  assign(a: AssignedTask): void {
    let run = this.runs.get(a.Task.ID);
    if (!run) {
      run = { assigned: a, status: a.Task.Status, chain: Promise.resolve() };
      this.runs.set(a.Task.ID, run);
    } else {
      run.assigned = a;
      // the manager's status may be further (orphaned...); never behind this node's own
      if (stateRank(a.Task.Status.State) > stateRank(run.status.State)) run.status = a.Task.Status;
    }
    this.drive(run);
  }

  /** A task no longer this node's: its container and files go. */
  async drop(taskId: string): Promise<void> {
    const run = this.runs.get(taskId);
    if (!run) return;
    run.stopping = true;
    const done = run.chain.then(async () => {
      run.watching?.abort();
      this.unwatchHealth(run);
      await this.removeContainer(run);
      await this.unplug(taskId);
      await this.deps.files.remove(taskId);
      this.runs.delete(taskId);
      this.deps.changed();
    });
    run.chain = done.catch(() => {});
    await done.catch((err: unknown) =>
      this.deps.log.warn('task removal failed', { taskId, error: errorMessage(err) }),
    );
  }

  /** Waits for every run's operations under way (tests, engine stop). */
  async settle(): Promise<void> {
    await Promise.all([...this.runs.values()].map((r) => r.chain.catch(() => {})));
  }

  /** The engine stops: no more waiting on exits (the containers keep running). */
  detach(): void {
    for (const r of this.runs.values()) {
      r.watching?.abort();
      this.unwatchHealth(r);
    }
  }

  private drive(run: Live): void {
    this.enqueue(run, () => this.step(run));
  }

  /** An operation on the task, after those already under way. */
  private enqueue(run: Live, op: () => Promise<void> | void): void {
    run.chain = run.chain.then(op).catch((err: unknown) =>
      this.deps.log.warn('task step failed', {
        taskId: run.assigned.Task.ID,
        error: errorMessage(err),
        stack: err instanceof Error ? err.stack : undefined,
      }),
    );
  }

  private setStatus(run: Live, state: TaskState, message: string, extra: Partial<TaskStatus> = {}): void {
    if (stateRank(state) <= stateRank(run.status.State)) return;
    const status: TaskStatus = {
      Timestamp: new Date().toISOString(),
      State: state,
      Message: message,
      ...extra,
    };
    // dockerd shows an empty PortStatus rather than none
    if (!status.PortStatus) status.PortStatus = run.status.PortStatus ?? {};
    run.status = status;
    this.deps.report(run.assigned.Task.ID, status);
    this.deps.changed();
  }

  private wantsStop(run: Live): boolean {
    return stateRank(run.assigned.Task.DesiredState) >= stateRank('shutdown');
  }

  private async step(run: Live): Promise<void> {
    if (!this.runs.has(run.assigned.Task.ID) || run.stopping) return;
    if (this.wantsStop(run)) return this.shutdown(run);
    const state = run.status.State;
    if (isTerminal(state)) return;
    // swarmkit's pause: a task desired only up to, say, `ready` goes no further until told
    const desired = run.assigned.Task.DesiredState;
    if (stateRank(desired) < stateRank('running') && stateRank(state) >= stateRank(desired)) return;
    if (state === 'starting' && run.containerId) {
      if (run.watching) return; // started, waiting for its health check
      if (await this.resumeStarting(run)) return;
    }
    if (stateRank(state) < stateRank('running')) return this.run(run);
    if (!run.watching) await this.reattach(run);
  }

  /** From assigned to running, or from where a pause (desired `ready`) or a restart left it. */
  private async run(run: Live): Promise<void> {
    if (stateRank(run.status.State) < stateRank('ready') || !run.containerId) {
      if (!(await this.prepare(run))) return;
    }
    if (this.wantsStop(run)) return this.shutdown(run);
    if (stateRank(run.assigned.Task.DesiredState) < stateRank('starting')) return;
    await this.start(run);
  }

  /** accepted → preparing → ready: the image, the files, the container; false when rejected. */
  private async prepare(run: Live): Promise<boolean> {
    const a = run.assigned;
    this.setStatus(run, 'accepted', 'accepted');
    this.setStatus(run, 'preparing', 'preparing');
    let containerId: string;
    try {
      const image = await this.ensureImage(a);
      const files = await this.deps.files.prepare(a, this.secrets, this.configs);
      const overlay =
        this.deps.overlay && onOverlay(a) ? await this.deps.overlay.gatewayAddress() : undefined;
      const spec = taskContainer(a, this.deps.node(), image, files, overlay);
      // a container of this task left by an engine that died while making it
      await this.deps.containers.remove(spec.name, { force: true }).catch(() => {});
      const created = await this.deps.containers.create({
        name: spec.name,
        config: spec.config,
        hostConfig: spec.hostConfig,
        networkingConfig: {},
        options: {
          defaultIpcMode: 'private',
          kernelMemory: false,
          readOnlyNonRecursive: false,
          defaultNetworkIsBridge: true,
        },
      });
      containerId = created.Id;
    } catch (err) {
      await this.deps.files.remove(a.Task.ID).catch(() => {});
      this.setStatus(run, 'rejected', run.status.Message, {
        Err: errorMessage(err),
        ContainerStatus: containerStatus(''),
      });
      return false;
    }
    run.containerId = containerId;
    this.setStatus(run, 'ready', 'prepared', { ContainerStatus: containerStatus(containerId) });
    return true;
  }

  /** starting → running: the container started, its exit awaited. */
  private async start(run: Live): Promise<void> {
    const a = run.assigned;
    const containerId = run.containerId as string;
    this.setStatus(run, 'starting', 'starting', { ContainerStatus: containerStatus(containerId) });
    const watching = new AbortController();
    let exit: Promise<{ StatusCode: number }> | undefined;
    try {
      // the exit is awaited from before the start: a task that ends at once is not missed
      exit = (await this.deps.containers.wait(containerId, 'next-exit', watching.signal))();
      // (an abort rejects it: handled here, whoever else waits on it)
      exit.catch(() => {});
      await this.deps.containers.start(containerId);
    } catch (err) {
      watching.abort();
      this.setStatus(run, 'failed', run.status.Message, {
        Err: errorMessage(err),
        ContainerStatus: containerStatus(containerId),
      });
      return;
    }
    run.watching = watching;
    const view = await this.deps.containers.inspect(containerId).catch(() => undefined);
    try {
      await this.plug(a, view?.State.Pid ?? 0, containerId);
    } catch (err) {
      watching.abort();
      await this.deps.containers.stop(containerId, { timeout: 0 }).catch(() => {});
      await this.unplug(a.Task.ID);
      this.setStatus(run, 'failed', run.status.Message, {
        Err: `cannot attach the task to its networks: ${errorMessage(err)}`,
        ContainerStatus: containerStatus(containerId),
      });
      return;
    }
    if (this.healthChecked(view)) {
      // swarmkit: `starting` until the health check passes
      this.watch(run, exit, watching);
      this.followHealth(run, containerId);
      return;
    }
    this.started(run, containerId, view);
    this.watch(run, exit, watching);
  }

  /** → running, with the container's process and host-mode ports. */
  private started(run: Live, containerId: string, view: ContainerInspect | undefined): void {
    this.setStatus(run, 'running', 'started', {
      ContainerStatus: containerStatus(containerId, view?.State.Pid ?? 0),
      ...(run.assigned.Service.HostPorts.length > 0 && view
        ? { PortStatus: { Ports: portStatus(view.NetworkSettings.Ports) } }
        : {}),
    });
  }

  /** The container has a health check the agent can follow. */
  private healthChecked(view: ContainerInspect | undefined): boolean {
    return !!this.deps.health && !!view && probeCommand(view.Config.Healthcheck) !== undefined;
  }

  /**
   * Follows the container's health for as long as it runs: healthy takes a `starting` task to
   * `running`; unhealthy stops the container (its exit then fails the task).
   */
  private followHealth(run: Live, containerId: string): void {
    const health = this.deps.health;
    if (!health) return;
    this.unwatchHealth(run);
    const on = (status: HealthStatus) => {
      if (run.stopping || run.containerId !== containerId || isTerminal(run.status.State)) return;
      if (status === 'healthy' && run.status.State === 'starting') {
        this.enqueue(run, () => this.becameHealthy(run, containerId));
      } else if (status === 'unhealthy' && !run.unhealthy) {
        run.unhealthy = true;
        // out of the VIPs, `tasks.<name>` and dnsrr at once, before the stop (dockerd's order)
        const told = this.deps.reportUnhealthy?.(run.assigned.Task.ID, run.status) ?? Promise.resolve();
        this.enqueue(run, () => this.stopUnhealthy(run, containerId, told));
      }
    };
    run.unwatchHealth = health(containerId, on);
    // a status the container reached before the listener was there
    void this.deps.containers
      .inspect(containerId)
      .then((v) => {
        const s = v.State.Health?.Status;
        if (s === 'healthy' || s === 'unhealthy') on(s);
      })
      .catch(() => {});
  }

  private unwatchHealth(run: Live): void {
    run.unwatchHealth?.();
    run.unwatchHealth = undefined;
  }

  private async becameHealthy(run: Live, containerId: string): Promise<void> {
    if (run.stopping || run.unhealthy || run.status.State !== 'starting' || run.containerId !== containerId)
      return;
    const view = await this.deps.containers.inspect(containerId).catch(() => undefined);
    if (!view?.State.Running) return; // its exit is on its way
    this.started(run, containerId, view);
  }

  /** swarmkit's controller on `health_status: unhealthy`: the container is shut down. */
  private async stopUnhealthy(run: Live, containerId: string, told: Promise<void>): Promise<void> {
    if (run.stopping || isTerminal(run.status.State)) return;
    // as dockerd waits for its gossip to converge: the managers have the task out of the backends
    // (the nodes follow within a moment), or GOSSIP_CONVERGE_MS went by
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([told, new Promise<void>((r) => (timer = setTimeout(r, GOSSIP_CONVERGE_MS)))]);
    clearTimeout(timer);
    if (run.stopping || isTerminal(run.status.State)) return;
    this.deps.log.info('task container unhealthy: stopping it', { taskId: run.assigned.Task.ID });
    await this.deps.containers
      .stop(containerId, { timeout: stopTimeoutSeconds(run.assigned) })
      .catch((err: unknown) =>
        this.deps.log.warn('cannot stop an unhealthy task container', {
          taskId: run.assigned.Task.ID,
          error: errorMessage(err),
        }),
      );
  }

  /**
   * A task left `starting` by the last engine (waiting for its health check) whose container still
   * runs: waited on and followed again. False when the container does not run (it is started anew).
   */
  private async resumeStarting(run: Live): Promise<boolean> {
    const view = await this.deps.containers.inspect(run.containerId as string).catch(() => undefined);
    if (!view?.State.Running) return false;
    const watching = new AbortController();
    const exit = (await this.deps.containers.wait(view.Id, 'not-running', watching.signal))();
    exit.catch(() => {});
    run.watching = watching;
    this.watch(run, exit, watching);
    if (this.healthChecked(view)) this.followHealth(run, view.Id);
    else this.started(run, view.Id, view);
    return true;
  }

  private watch(run: Live, exit: Promise<{ StatusCode: number }>, watching: AbortController): void {
    exit.then(
      (r) => {
        if (run.watching === watching) run.watching = undefined;
        if (watching.signal.aborted || run.stopping) return;
        run.chain = run.chain.then(() => this.exited(run, r.StatusCode));
      },
      () => {
        if (run.watching === watching) run.watching = undefined;
      },
    );
  }

  private exited(run: Live, code: number): void {
    this.unwatchHealth(run);
    if (run.stopping || isTerminal(run.status.State) || !this.runs.has(run.assigned.Task.ID)) return;
    const cs = containerStatus(run.containerId ?? '', 0, code);
    if (code === 0) this.setStatus(run, 'complete', 'finished', { ContainerStatus: cs });
    // swarmkit keeps the message of the running state ("started") with the error
    else
      this.setStatus(run, 'failed', run.status.Message, {
        ContainerStatus: cs,
        Err: exitError(code, run.unhealthy ? UNHEALTHY : undefined),
      });
  }

  /** A running task after an engine restart or a reconnect: wait on its container again. */
  private async reattach(run: Live): Promise<void> {
    const ref = run.containerId ?? taskContainer(run.assigned, this.deps.node(), '', []).name;
    const view = await this.deps.containers.inspect(ref).catch(() => undefined);
    if (!view) {
      this.setStatus(run, 'failed', run.status.Message, { Err: `No such container: ${ref}` });
      return;
    }
    run.containerId = view.Id;
    const watching = new AbortController();
    const exit = (await this.deps.containers.wait(view.Id, 'not-running', watching.signal))();
    run.watching = watching;
    this.watch(run, exit, watching);
    if (this.healthChecked(view)) this.followHealth(run, view.Id);
  }

  /** Desired shutdown (or beyond): stop, drop the files, report `shutdown`; the container stays. */
  private async shutdown(run: Live): Promise<void> {
    const wasTerminal = isTerminal(run.status.State);
    run.stopping = true;
    run.watching?.abort();
    run.watching = undefined;
    this.unwatchHealth(run);
    let exitCode: number | undefined;
    if (run.containerId) {
      await this.deps.containers
        .stop(run.containerId, { timeout: stopTimeoutSeconds(run.assigned) })
        .catch((err: unknown) => {
          // gone, or stopped already (the health watch stops an unhealthy task's container first)
          if (!isKind(err, 'NotFound') && !isKind(err, 'NotModified')) throw err;
        });
      exitCode = (await this.deps.containers.inspect(run.containerId).catch(() => undefined))?.State.ExitCode;
    }
    await this.deps.files.remove(run.assigned.Task.ID);
    await this.unplug(run.assigned.Task.ID);
    if (!wasTerminal) {
      this.setStatus(run, 'shutdown', 'shutdown', {
        ...(run.status.ContainerStatus?.ContainerID
          ? { ContainerStatus: containerStatus(run.status.ContainerStatus.ContainerID, 0, exitCode ?? 0) }
          : {}),
      });
    }
  }

  /** A started task container on overlay networks joins them, and its VIP table is set. */
  private async plug(a: AssignedTask, pid: number, containerId: string): Promise<void> {
    const overlay = this.deps.overlay;
    if (!overlay || !onOverlay(a)) return;
    if (!pid) throw new Error('the container has no process');
    await overlay.attach({
      taskId: a.Task.ID,
      containerId,
      netns: sandboxOf(pid),
      // host-mode ports are published on the node's default bridge, which the container keeps
      keepsDefaultNetwork: a.Service.HostPorts.length > 0,
      attachments: (a.Task.NetworksAttachments ?? []).map((n) => ({
        networkId: n.Network.ID,
        address: n.Addresses[0] ?? '',
      })),
    });
    this.pids.set(a.Task.ID, pid);
    await this.balance(a.Task.ID);
  }

  private async unplug(taskId: string): Promise<void> {
    const pid = this.pids.get(taskId);
    this.pids.delete(taskId);
    if (pid && this.deps.lb) await this.deps.lb.clear(sandboxOf(pid)).catch(() => {});
    await this.deps.overlay
      ?.detach(taskId)
      .catch((err: unknown) =>
        this.deps.log.warn('cannot detach a task from its networks', { taskId, error: errorMessage(err) }),
      );
  }

  /**
   * The managers' picture of the node's networks came or changed: running tasks not plugged yet
   * (after an engine restart, whose start swept the overlay plumbing) are plugged again, and each
   * plugged task's VIP table set again.
   */
  async overlayChanged(): Promise<void> {
    const overlay = this.deps.overlay;
    if (!overlay) return;
    for (const run of this.runs.values()) {
      const id = run.assigned.Task.ID;
      if (!onOverlay(run.assigned) || overlay.attached(id) || !run.containerId || run.stopping) continue;
      if (run.status.State !== 'running') continue;
      const view = await this.deps.containers.inspect(run.containerId).catch(() => undefined);
      if (!view?.State.Running) continue;
      await this.plug(run.assigned, view.State.Pid, view.Id).catch((err: unknown) =>
        this.deps.log.warn('cannot attach a task to its networks again', {
          taskId: id,
          error: errorMessage(err),
        }),
      );
    }
    for (const id of this.pids.keys()) await this.balance(id);
  }

  private async balance(taskId: string): Promise<void> {
    const pid = this.pids.get(taskId);
    const lb = this.deps.lb;
    if (!pid || !lb || !this.deps.overlay) return;
    // a VIP with no running task behind it has nothing to spread over: left out of the table
    const vips = this.deps.overlay
      .vipsFor(taskId)
      .filter((v) => v.backends.length > 0)
      .map((v) => ({ vip: v.vip, backends: v.backends }));
    await lb
      .apply(sandboxOf(pid), vips)
      .catch((err: unknown) =>
        this.deps.log.warn('cannot set a task VIP table', { taskId, error: errorMessage(err) }),
      );
  }

  private async removeContainer(run: Live): Promise<void> {
    const ref = run.containerId ?? taskContainer(run.assigned, this.deps.node(), '', []).name;
    await this.deps.containers.remove(ref, { force: true, volumes: false }).catch((err: unknown) => {
      if (!isKind(err, 'NotFound')) throw err;
    });
  }

  /**
   * The task's image on this node: as given, or (with the digest CLI added) by its name and tag;
   * else pulled with the service's registry auth. Missing after that: `No such image: <ref>`.
   */
  private async ensureImage(a: AssignedTask): Promise<string> {
    const ref = a.Task.Spec.ContainerSpec?.Image ?? '';
    const candidates = ref.includes('@') ? [ref, ref.slice(0, ref.indexOf('@'))] : [ref];
    const local = async () => {
      for (const c of candidates) {
        if (c === '') continue;
        try {
          await this.deps.images.resolve(c);
          return c;
        } catch (err) {
          if (!isKind(err, 'NotFound')) throw err;
        }
      }
      return undefined;
    };
    const found = await local();
    if (found) return found;
    if (this.deps.images.pull && ref !== '') {
      try {
        const { name, tag } = splitReference(ref);
        await this.deps.images.pull({
          image: name,
          tag,
          ...(a.Service.RegistryAuth ? { registryAuth: a.Service.RegistryAuth } : {}),
          signal: AbortSignal.timeout(PULL_TIMEOUT_MS),
          onMessage: () => {},
        });
        const pulled = await local();
        if (pulled) return pulled;
      } catch (err) {
        this.deps.log.info('task image pull failed', { image: ref, error: errorMessage(err) });
      }
    }
    throw notFound(`No such image: ${ref}`);
  }
}

/** The task has addresses on swarm networks. */
function onOverlay(a: AssignedTask): boolean {
  return (a.Task.NetworksAttachments ?? []).length > 0;
}

/** A container's network namespace by its process, as the load balancer takes it. */
function sandboxOf(pid: number): string {
  return `/proc/${pid}/ns/net`;
}

/** A reference as written split for a pull: the digest if any, else the tag, else `latest`. */
export function splitReference(ref: string): { name: string; tag: string } {
  const at = ref.indexOf('@');
  if (at >= 0) {
    const named = ref.slice(0, at);
    const colon = named.lastIndexOf(':');
    const name = colon > named.lastIndexOf('/') ? named.slice(0, colon) : named;
    return { name, tag: ref.slice(at + 1) };
  }
  const colon = ref.lastIndexOf(':');
  if (colon > ref.lastIndexOf('/')) return { name: ref.slice(0, colon), tag: ref.slice(colon + 1) };
  return { name: ref, tag: 'latest' };
}

/** moby's ContainerStatus: the three fields always (PID 0 when not running, exit code 0 until it exits). */
function containerStatus(ContainerID: string, PID = 0, ExitCode = 0) {
  return { ContainerID, PID, ExitCode };
}

/** The container's bound host ports as the task's PortStatus (host mode). */
function portStatus(ports: Record<string, { HostPort?: string }[] | null>): PortConfig[] {
  const out: PortConfig[] = [];
  for (const [key, bindings] of Object.entries(ports)) {
    const [port, proto] = key.split('/');
    const published = Number(bindings?.[0]?.HostPort ?? 0);
    if (!bindings || !published) continue;
    out.push({
      Protocol: (proto ?? 'tcp') as PortConfig['Protocol'],
      TargetPort: Number(port),
      PublishedPort: published,
      PublishMode: 'host',
    });
  }
  return out;
}
