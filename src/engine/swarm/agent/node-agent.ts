import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { errnoCode, errorMessage, isKind } from '../../../common/errors.js';
import { writeJsonAtomic } from '../../../common/fs/atomic.js';
import type { Logger } from '../../../common/log.js';
import type { IngressMesh, ServiceLb } from '../../network/lb/lb.types.js';
import type {
  AssignmentChanges,
  AssignmentMessage,
  FullAssignments,
  StatusAnswer,
  StatusCall,
} from '../cluster-api/assignments.types.js';
import type { AssignmentsStream } from '../cluster-api/assignments-client.js';
import type { ClientTls } from '../cluster-api/client.js';
import type { ManagerAddress } from '../cluster-api/protocol.js';
import type { LogPublishAnswer, LogPublishCall } from '../logs/logs.types.js';
import type { NetworkAttachments } from './attachments.js';
import { type AgentContainers, type AgentImages, Executor, type SavedRun } from './executor.js';
import { IngressSandbox } from './ingress-sandbox.js';
import { type AgentLogContainers, LogPublisher } from './log-publisher.js';
import type { OverlayPort } from './overlay-port.js';
import { StatusReporter } from './status-reporter.js';
import type { TaskFiles } from './task-files.js';
import type { HealthEvents } from './task-health.js';

/**
 * The node's agent, on every node of a swarm (managers too, through their own cluster API): one
 * assignments stream to one manager at a time, the next in the list when it goes (with backoff);
 * the executor runs what it assigns, and the reporter sends the states back. The set of runs is
 * kept in `<data-root>/swarm/agent-tasks.json`, so that an engine restart takes its running tasks
 * up again; their secrets never touch the disk. On each (re)connection the manager's full set
 * comes first, and containers of tasks not in it are removed before anything else runs. Log
 * subscriptions that come down the stream are served by the log publisher (log-publisher.ts).
 */

/** What the agent learns from the swarm service when it starts. */
export interface AgentContext {
  nodeId: string;
  /** Read at every connection (a renewed certificate is used from then on). */
  tls(): Promise<Required<ClientTls>>;
  /** The managers to try in order (a manager's own cluster API first). */
  managers(): ManagerAddress[];
}

/** The small interface the swarm service drives: start when active, stop on close, leave. */
export interface SwarmAgent {
  start(ctx: AgentContext): Promise<void>;
  /** The engine stops: streams end, task containers keep running. */
  stop(): Promise<void>;
  /** The node leaves: every task container and its secret and config files go. */
  leave(): Promise<void>;
}

export interface NodeAgentOptions {
  /** `<data-root>/swarm`. */
  stateDir: string;
  containers: AgentContainers;
  images: AgentImages;
  files: TaskFiles;
  hostname: () => string;
  log: Logger;
  connect: (
    addr: string,
    tls: Required<ClientTls>,
    onMessage: (m: AssignmentMessage) => void,
    idleMs: number,
  ) => AssignmentsStream;
  postStatus: (addr: string, call: StatusCall, tls: Required<ClientTls>) => Promise<StatusAnswer>;
  /** Service logs: the containers' logs and the way back to the manager (absent: none published). */
  logs?: {
    containers: AgentLogContainers;
    post: (
      addr: string,
      id: string,
      call: LogPublishCall,
      tls: Required<ClientTls>,
    ) => Promise<LogPublishAnswer>;
  };
  /**
   * Plain containers on attachable swarm networks (absent: none), with the cluster API call
   * their requests to the manager go through.
   */
  attachments?: {
    port: NetworkAttachments;
    call: (
      addr: string,
      method: 'GET' | 'POST',
      path: string,
      body: unknown,
      tls: Required<ClientTls>,
    ) => Promise<unknown>;
  };
  /** The node's overlay data plane (absent: tasks on overlay networks run without it). */
  overlay?: OverlayPort;
  /** The VIP load balancer (absent: none). */
  lb?: ServiceLb;
  /** The node's routing mesh (absent: ingress-published ports answer nowhere). */
  ingress?: IngressMesh;
  /** The task containers' health changes (absent: health checks do not hold tasks in `starting`). */
  health?: HealthEvents;
  /** Backoff between connection attempts: first and largest (ms). */
  backoffMs?: { first: number; max: number };
}

interface SavedState {
  nodeId: string;
  runs: SavedRun[];
}

const TASK_LABEL = 'com.docker.swarm.task.id';
/** Before the manager has told its heartbeat period. */
const FIRST_IDLE_MS = 16_000;

export class NodeAgent implements SwarmAgent {
  private ctx?: AgentContext;
  private executor?: Executor;
  private reporter?: StatusReporter;
  private stream?: AssignmentsStream;
  private loop?: Promise<void>;
  private stopper?: AbortController;
  private learned: ManagerAddress[] = [];
  private current?: string;
  private applying: Promise<void> = Promise.resolve();
  private saveTimer?: NodeJS.Timeout;
  private readonly statePath: string;
  private publisher?: LogPublisher;
  private mesh?: IngressSandbox;

  constructor(private readonly opts: NodeAgentOptions) {
    this.statePath = join(opts.stateDir, 'agent-tasks.json');
  }

  /** The manager the agent is connected to (tests, logs). */
  get manager(): string | undefined {
    return this.current;
  }

  async start(ctx: AgentContext): Promise<void> {
    if (this.loop) await this.stop();
    this.ctx = ctx;
    this.learned = [];
    const reporter = new StatusReporter((call) => this.sendStatus(call), this.opts.log);
    this.reporter = reporter;
    const executor = new Executor({
      containers: this.opts.containers,
      images: this.opts.images,
      files: this.opts.files,
      node: () => ({ ID: ctx.nodeId, Hostname: this.opts.hostname() }),
      report: (id, status) => reporter.report(id, status),
      reportUnhealthy: (id, status) => reporter.reportUnhealthy(id, status),
      changed: () => this.scheduleSave(),
      log: this.opts.log,
      ...(this.opts.overlay ? { overlay: this.opts.overlay } : {}),
      ...(this.opts.lb ? { lb: this.opts.lb } : {}),
      ...(this.opts.health ? { health: this.opts.health } : {}),
    });
    this.executor = executor;
    this.mesh =
      this.opts.overlay && this.opts.ingress
        ? new IngressSandbox(this.opts.overlay, this.opts.ingress, this.opts.log)
        : undefined;
    // what an earlier engine plumbed goes; running tasks are plugged again once the picture comes
    await this.opts.overlay
      ?.sweep()
      .catch((err: unknown) =>
        this.opts.log.warn('cannot sweep the overlay networks', { error: errorMessage(err) }),
      );
    const logs = this.opts.logs;
    this.publisher = logs
      ? new LogPublisher({
          containers: logs.containers,
          post: async (addr, id, call) => logs.post(addr, id, call, await ctx.tls()),
          log: this.opts.log,
        })
      : undefined;
    for (const run of await this.loadSaved(ctx.nodeId)) executor.restore(run);
    const attachments = this.opts.attachments;
    attachments?.port.useLink({
      call: async <T>(method: 'GET' | 'POST', path: string, body?: unknown) => {
        const addr = this.current ?? this.managerList()[0]?.Addr;
        if (!addr) throw new Error('no manager to ask');
        return (await attachments.call(addr, method, path, body, await ctx.tls())) as T;
      },
    });
    const stopper = new AbortController();
    this.stopper = stopper;
    this.loop = this.connectLoop(stopper.signal);
    this.opts.log.info('swarm agent started', { nodeId: ctx.nodeId });
  }

  async stop(): Promise<void> {
    this.opts.attachments?.port.useLink(undefined);
    this.stopper?.abort();
    this.stream?.close();
    this.publisher?.stopAll();
    await this.loop?.catch(() => {});
    this.loop = undefined;
    this.reporter?.stop();
    this.executor?.detach();
    await this.applying.catch(() => {});
    // operations under way finish (bounded: a stop waits for a grace period at most)
    if (this.executor) await Promise.race([this.executor.settle(), sleep(15_000, undefined, { ref: false })]);
    await this.save();
  }

  async leave(): Promise<void> {
    // the containers' network attachments go back while the managers still answer this node
    await this.opts.attachments?.port.releaseAll();
    await this.stop();
    const executor = this.executor;
    if (executor) for (const id of executor.taskIds()) await executor.drop(id);
    await this.removeStale(new Set());
    await this.opts.attachments?.port.leave();
    await this.opts.files.removeAll();
    await this.mesh
      ?.leave()
      .catch((err: unknown) =>
        this.opts.log.warn('cannot remove the routing mesh', { error: errorMessage(err) }),
      );
    await this.opts.overlay?.sweep();
    await rm(this.statePath, { force: true });
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    this.executor = undefined;
    this.reporter = undefined;
    this.ctx = undefined;
  }

  /** Waits until what came from the manager so far has been applied and settled (tests). */
  async idle(): Promise<void> {
    await this.applying;
    await this.executor?.settle();
  }

  // --- the link to the managers ---------------------------------------------------------------

  private managerList(): ManagerAddress[] {
    const seen = new Set<string>();
    const out: ManagerAddress[] = [];
    for (const m of [...(this.ctx?.managers() ?? []), ...this.learned]) {
      if (!m.Addr || seen.has(m.Addr)) continue;
      seen.add(m.Addr);
      out.push(m);
    }
    return out;
  }

  private async connectLoop(signal: AbortSignal): Promise<void> {
    const backoff = this.opts.backoffMs ?? { first: 200, max: 5000 };
    let delay = backoff.first;
    let index = 0;
    while (!signal.aborted) {
      const managers = this.managerList();
      const manager = managers[index % Math.max(1, managers.length)];
      if (manager) {
        try {
          const gotFull = await this.session(manager.Addr);
          if (gotFull) delay = backoff.first;
        } catch (err) {
          this.opts.log.debug('assignments stream ended', {
            manager: manager.Addr,
            error: errorMessage(err),
          });
        }
      }
      if (signal.aborted) break;
      index++;
      await sleep(delay, undefined, { signal }).catch(() => {});
      delay = Math.min(delay * 2, backoff.max);
    }
  }

  /** One stream to one manager; true when its full set came. */
  private async session(addr: string): Promise<boolean> {
    const ctx = this.ctx;
    if (!ctx) return false;
    const tls = await ctx.tls();
    let gotFull = false;
    const stream = this.opts.connect(
      addr,
      tls,
      (m) => {
        if (m.type === 'ping') return;
        // log subscriptions are served beside the assignments, not after them
        if (m.type === 'logs') return this.publisher?.start(addr, m.subscription);
        if (m.type === 'logs-end') return this.publisher?.end(m.ID);
        if (m.type === 'full') {
          gotFull = true;
          stream.setIdle(3 * m.periodMs + 1000);
        }
        this.applying = this.applying
          .then(() => (m.type === 'full' ? this.applyFull(m, addr) : this.applyChanges(m)))
          .catch((err: unknown) =>
            this.opts.log.warn('applying assignments failed', { error: errorMessage(err) }),
          );
      },
      FIRST_IDLE_MS,
    );
    this.stream = stream;
    try {
      await stream.done;
    } catch (err) {
      if (gotFull)
        this.opts.log.info('lost the assignments stream', { manager: addr, error: errorMessage(err) });
      throw err;
    } finally {
      if (this.stream === stream) this.stream = undefined;
    }
    return gotFull;
  }

  private async sendStatus(call: StatusCall): Promise<StatusAnswer> {
    const ctx = this.ctx;
    const addr = this.current ?? this.managerList()[0]?.Addr;
    if (!ctx || !addr) throw new Error('no manager to report to');
    return this.opts.postStatus(addr, call, await ctx.tls());
  }

  // --- applying assignments ---------------------------------------------------------------------

  private async applyFull(m: FullAssignments, addr: string): Promise<void> {
    const executor = this.executor;
    if (!executor) return;
    this.current = addr;
    if (m.managers.length > 0) this.learned = m.managers;
    executor.secrets.clear();
    executor.configs.clear();
    for (const o of m.secrets) executor.secrets.set(o.ID, o);
    for (const o of m.configs) executor.configs.set(o.ID, o);
    // the networks' picture before any task is plugged into them
    if (m.overlay) await this.opts.overlay?.sync(m.overlay);
    const keep = new Set(m.tasks.map((t) => t.Task.ID));
    // what this node no longer has goes before anything else runs
    for (const id of executor.taskIds()) if (!keep.has(id)) await executor.drop(id);
    await this.removeStale(keep);
    for (const t of m.tasks) executor.assign(t);
    this.reporter?.flush();
    await executor.overlayChanged();
    await this.mesh?.sync(m.overlay?.ingress);
    const attachments = this.opts.attachments?.port;
    if (attachments) {
      await attachments.overlayChanged();
      // containers that left while the engine was down: their attachment tasks go
      void attachments.reconcile();
    }
    this.opts.log.debug('assignments received', { manager: addr, tasks: m.tasks.length });
  }

  private async applyChanges(m: AssignmentChanges): Promise<void> {
    const executor = this.executor;
    if (!executor) return;
    for (const o of m.secrets) executor.secrets.set(o.ID, o);
    for (const o of m.configs) executor.configs.set(o.ID, o);
    if (m.overlay) await this.opts.overlay?.sync(m.overlay);
    // not awaited: a removal waits for its task's operation under way (a pull...), not the others
    for (const id of m.removed) void executor.drop(id);
    for (const t of m.tasks) executor.assign(t);
    for (const id of m.removedSecrets) executor.secrets.delete(id);
    for (const id of m.removedConfigs) executor.configs.delete(id);
    if (m.overlay) {
      await executor.overlayChanged();
      await this.mesh?.sync(m.overlay.ingress);
      await this.opts.attachments?.port.overlayChanged();
    }
  }

  /** Task containers on this engine whose task is not in `keep` (and not run): removed. */
  private async removeStale(keep: Set<string>): Promise<void> {
    const list = await this.opts.containers.list({ all: true, filters: new Map([['label', [TASK_LABEL]]]) });
    for (const c of list) {
      const taskId = c.Labels[TASK_LABEL] ?? '';
      if (keep.has(taskId) || this.executor?.has(taskId)) continue;
      this.opts.log.info('removing the container of a task this node no longer has', {
        container: c.Id,
        taskId,
      });
      await this.opts.containers.remove(c.Id, { force: true }).catch((err: unknown) => {
        if (!isKind(err, 'NotFound')) throw err;
      });
      if (taskId !== '') await this.opts.files.remove(taskId);
    }
  }

  // --- what survives an engine restart ------------------------------------------------------------

  private scheduleSave(): void {
    if (this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = undefined;
      void this.save().catch((err: unknown) =>
        this.opts.log.warn('cannot save the agent state', { error: errorMessage(err) }),
      );
    }, 50);
    this.saveTimer.unref();
  }

  private async save(): Promise<void> {
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    const ctx = this.ctx;
    const executor = this.executor;
    if (!ctx || !executor) return;
    const state: SavedState = { nodeId: ctx.nodeId, runs: executor.saved() };
    await writeJsonAtomic(this.statePath, state, 'file');
  }

  private async loadSaved(nodeId: string): Promise<SavedRun[]> {
    try {
      const state = JSON.parse(await readFile(this.statePath, 'utf8')) as SavedState;
      return state.nodeId === nodeId && Array.isArray(state.runs) ? state.runs : [];
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT')
        this.opts.log.warn('cannot read the agent state', { error: errorMessage(err) });
      return [];
    }
  }
}
