import { errorMessage, forbidden } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { newSwarmId } from '../ca/tokens.js';
import { keys } from '../keys.js';
import { LogBroker } from '../logs/log-broker.js';
import type { LogPublishAnswer, LogPublishCall } from '../logs/logs.types.js';
import {
  type AttachAnswer,
  type AttachCall,
  attachContainer,
  listAttachments,
  type NodeAttachment,
  type ReleaseCall,
  releaseContainer,
} from '../networks/attachment-tasks.js';
import { nodeOverlay } from '../networks/node-overlay.js';
import { unseal } from '../seal.js';
import { objectKeys } from '../secrets/object-keys.js';
import type { StoredObject } from '../secrets/secrets.types.js';
import type { StoredService } from '../services/service.types.js';
import { effectiveHeartbeatMs } from '../spec.js';
import type { ClusterStore, WatchEvent } from '../store/cluster-store.js';
import type { SwarmSpec } from '../swarm.types.js';
import { isAttachment, isTerminal, type StoredTask, stateRank } from '../tasks/task.types.js';
import type {
  AgentApiHandlers,
  AssignedObject,
  AssignedService,
  AssignedTask,
  AssignmentMessage,
  StatusAnswer,
  StatusCall,
} from './assignments.types.js';
import type { ManagerAddress } from './protocol.js';
import { applyStatusCall } from './task-status.js';

/**
 * A manager's task dispatch for the agents (`GET /v1/assignments`, `POST /v1/status`). A node's
 * set is its tasks (NodeID = it) from `assigned` on, until the task is deleted (swarmkit: a
 * finished task's stopped container stays on its node, for its logs, until the reaper deletes the
 * task); the secrets and configs the tasks not yet over reference go with them, unsealed, and only
 * those (swarmkit releases a finished task's).
 * The first line is the whole set; then each change the manager's etcd watch sees; a ping every
 * heartbeat period, so that an agent can tell a dead link from a quiet one. Log subscriptions for
 * the node's tasks (logs/log-broker.ts) are sent down the stream as well.
 */

/** Whether a task belongs in its node's assignment set. */
export function isAssigned(task: StoredTask, nodeId: string): boolean {
  if (task.NodeID !== nodeId) return false;
  // a container's network attachment is no task to run (the node holds it: agent/attachments.ts)
  if (isAttachment(task)) return false;
  return stateRank(task.Status.State) >= stateRank('assigned');
}

/** Desired and reported terminal: the task needs its secrets and configs no more. */
function isOver(t: AssignedTask): boolean {
  return isTerminal(t.Task.DesiredState) && isTerminal(t.Task.Status.State);
}

/** The API's Task without the private fields (`_`): what an agent gets. */
function publicTask(t: StoredTask): AssignedTask['Task'] {
  const { _: _private, ...task } = t;
  return task;
}

function referenced(tasks: Iterable<AssignedTask>): { secrets: Set<string>; configs: Set<string> } {
  const secrets = new Set<string>();
  const configs = new Set<string>();
  for (const t of tasks) {
    if (isOver(t)) continue;
    const spec = t.Task.Spec.ContainerSpec;
    for (const s of spec?.Secrets ?? []) if (s.SecretID) secrets.add(s.SecretID);
    for (const c of spec?.Configs ?? []) if (c.ConfigID) configs.add(c.ConfigID);
  }
  return { secrets, configs };
}

/** What a stream has sent so far: the objects, and the overlay picture (as JSON). */
interface Sent {
  secrets: Set<string>;
  configs: Set<string>;
  overlay: string;
}

export class TaskDispatch implements AgentApiHandlers {
  constructor(
    private readonly store: ClusterStore,
    private readonly dek: Buffer,
    private readonly log: Logger,
    private readonly now: () => Date,
    private readonly managers: () => Promise<ManagerAddress[]>,
    private readonly logs: LogBroker = new LogBroker(),
  ) {}

  async publishLogs(nodeId: string, subscriptionId: string, call: LogPublishCall): Promise<LogPublishAnswer> {
    return this.logs.publish(nodeId, subscriptionId, call);
  }

  async attach(nodeId: string, call: AttachCall): Promise<AttachAnswer> {
    await this.member(nodeId);
    return attachContainer(this.store, nodeId, call, { now: this.now, newId: newSwarmId });
  }

  async release(nodeId: string, call: ReleaseCall): Promise<{ Released: string[] }> {
    await this.member(nodeId);
    return releaseContainer(this.store, nodeId, call);
  }

  async attachments(nodeId: string): Promise<NodeAttachment[]> {
    await this.member(nodeId);
    return listAttachments(this.store, nodeId);
  }

  async status(nodeId: string, call: StatusCall): Promise<StatusAnswer> {
    await this.member(nodeId);
    return applyStatusCall(this.store, nodeId, call, this.now);
  }

  /** A removed node's certificate gets nothing. */
  private async member(nodeId: string): Promise<void> {
    if (!(await this.store.get(keys.node(nodeId))))
      throw forbidden(`node ${nodeId} is not a member of this swarm`);
  }

  async assignments(
    nodeId: string,
    send: (m: AssignmentMessage) => void,
    signal: AbortSignal,
  ): Promise<void> {
    await this.member(nodeId);
    const periodMs = await this.periodMs();
    // each service read once per message (a service changed since is read again for the next)
    const services = new Map<string, AssignedService>();
    const current = new Map<string, { task: AssignedTask; text: string }>();
    const sent: Sent = { secrets: new Set<string>(), configs: new Set<string>(), overlay: '' };

    const list = await this.store.range(keys.tasks);
    for (const kv of list.kvs) {
      const task = JSON.parse(kv.value) as StoredTask;
      if (!isAssigned(task, nodeId)) continue;
      const assigned = await this.assigned(task, services);
      current.set(task.ID, { task: assigned, text: kv.value });
    }
    const refs = referenced([...current.values()].map((c) => c.task));
    const secrets = await this.objects('secret', refs.secrets);
    const configs = await this.objects('config', refs.configs);
    for (const o of secrets) sent.secrets.add(o.ID);
    for (const o of configs) sent.configs.add(o.ID);
    const overlay = await nodeOverlay(this.store, nodeId);
    sent.overlay = JSON.stringify(overlay);
    send({
      type: 'full',
      tasks: [...current.values()].map((c) => c.task),
      secrets,
      configs,
      overlay,
      managers: await this.managers(),
      periodMs,
    });

    let chain = Promise.resolve();
    await new Promise<void>((resolve, reject) => {
      const finish = (err?: Error) => {
        detachLogs();
        watch.close();
        clearInterval(ping);
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onAbort = () => finish();
      const onEvents = (events: WatchEvent[]) => {
        chain = chain
          .then(() => this.changes(nodeId, events, current, sent, send))
          .catch((err: unknown) => {
            this.log.warn('assignments stream failed', { nodeId, error: errorMessage(err) });
            finish(err instanceof Error ? err : new Error(String(err)));
          });
      };
      // log subscriptions for this node's tasks go down this stream (logs/log-broker.ts)
      const detachLogs = this.logs.attach(nodeId, send);
      const watch = this.store.watch(keys.tasks, list.revision + 1, {
        onEvents,
        onError: (err) => finish(err),
      });
      const ping = setInterval(() => send({ type: 'ping' }), periodMs);
      ping.unref();
      if (signal.aborted) return finish();
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** One watch batch: the node's tasks that came, changed or went, and the objects that follow. */
  private async changes(
    nodeId: string,
    events: WatchEvent[],
    current: Map<string, { task: AssignedTask; text: string }>,
    sent: Sent,
    send: (m: AssignmentMessage) => void,
  ): Promise<void> {
    const services = new Map<string, AssignedService>();
    const changed = new Map<string, AssignedTask>();
    const removed = new Set<string>();
    for (const e of events) {
      const id = e.kv.key.slice(keys.tasks.length);
      const task = e.type === 'put' ? (JSON.parse(e.kv.value) as StoredTask) : undefined;
      if (task && isAssigned(task, nodeId)) {
        if (current.get(id)?.text === e.kv.value) continue;
        const assigned = await this.assigned(task, services);
        current.set(id, { task: assigned, text: e.kv.value });
        changed.set(id, assigned);
        removed.delete(id);
      } else if (current.delete(id)) {
        changed.delete(id);
        removed.add(id);
      }
    }
    // the overlay picture changes with any task on the node's networks, on whatever node
    const overlay = (await this.overlayMoved(events, sent))
      ? await nodeOverlay(this.store, nodeId)
      : undefined;
    const overlayText = overlay ? JSON.stringify(overlay) : sent.overlay;
    const overlayChanged = overlayText !== sent.overlay;
    sent.overlay = overlayText;
    if (changed.size === 0 && removed.size === 0 && !overlayChanged) return;
    const refs = referenced([...current.values()].map((c) => c.task));
    const secrets = await this.objects(
      'secret',
      [...refs.secrets].filter((id) => !sent.secrets.has(id)),
    );
    const configs = await this.objects(
      'config',
      [...refs.configs].filter((id) => !sent.configs.has(id)),
    );
    for (const o of secrets) sent.secrets.add(o.ID);
    for (const o of configs) sent.configs.add(o.ID);
    const removedSecrets = [...sent.secrets].filter((id) => !refs.secrets.has(id));
    const removedConfigs = [...sent.configs].filter((id) => !refs.configs.has(id));
    for (const id of removedSecrets) sent.secrets.delete(id);
    for (const id of removedConfigs) sent.configs.delete(id);
    send({
      type: 'changes',
      tasks: [...changed.values()],
      removed: [...removed],
      secrets,
      configs,
      removedSecrets,
      removedConfigs,
      ...(overlayChanged && overlay ? { overlay } : {}),
    });
  }

  /** Whether a batch may change the node's overlay picture: a task with attachments came, changed or went. */
  private async overlayMoved(events: WatchEvent[], sent: Sent): Promise<boolean> {
    for (const e of events) {
      if (e.type === 'delete') {
        if (sent.overlay.includes('"peers":[{')) return true;
        continue;
      }
      if (e.kv.value.includes('"NetworksAttachments"')) return true;
    }
    return false;
  }

  private async assigned(task: StoredTask, services: Map<string, AssignedService>): Promise<AssignedTask> {
    if (!services.has(task.ServiceID)) {
      const found = await this.service(task.ServiceID);
      if (found) services.set(task.ServiceID, found);
    }
    const service = services.get(task.ServiceID) ?? {
      ID: task.ServiceID,
      Name: task._?.serviceName ?? task.ServiceID,
      Labels: {},
      HostPorts: [],
    };
    return { Task: publicTask(task), Service: service };
  }

  private async service(id: string): Promise<AssignedService | undefined> {
    const kv = await this.store.get(keys.service(id));
    if (!kv) return undefined;
    const s = JSON.parse(kv.value) as StoredService;
    const ports = s.Endpoint?.Ports ?? s.Spec.EndpointSpec?.Ports ?? [];
    return {
      ID: s.ID,
      Name: s.Spec.Name ?? s.ID,
      Labels: s.Spec.Labels ?? {},
      HostPorts: ports.filter((p) => p.PublishMode === 'host'),
      ...(s._?.registryAuth ? { RegistryAuth: s._.registryAuth } : {}),
    };
  }

  /** Secrets or configs by ID, their data unsealed; one that is gone is left out. */
  private async objects(kind: 'secret' | 'config', ids: Iterable<string>): Promise<AssignedObject[]> {
    const k = objectKeys(kind);
    const out: AssignedObject[] = [];
    for (const id of ids) {
      const kv = await this.store.get(k.object(id));
      if (!kv) continue;
      const o = JSON.parse(kv.value) as StoredObject;
      const templating = o.Spec.Templating ? { Templating: { Name: o.Spec.Templating.Name } } : {};
      out.push({ ID: o.ID, Name: o.Spec.Name, Data: unseal(this.dek, o._.data), ...templating });
    }
    return out;
  }

  private async periodMs(): Promise<number> {
    const kv = await this.store.get(keys.cluster);
    const spec = kv ? (JSON.parse(kv.value) as { Spec?: SwarmSpec }).Spec : undefined;
    return spec ? effectiveHeartbeatMs(spec) : 5000;
  }
}
