import type { NodeOverlayState } from '../../network/overlay/overlay.types.js';
import type { LogStreamMessage } from '../logs/log-broker.js';
import type { LogPublishAnswer, LogPublishCall } from '../logs/logs.types.js';
import type { AttachAnswer, AttachCall, NodeAttachment, ReleaseCall } from '../networks/attachment-tasks.js';
import type { PortConfig } from '../services/service.types.js';
import type { Task, TaskStatus } from '../tasks/task.types.js';
import type { ManagerAddress } from './protocol.js';

/**
 * The agent's side of the cluster API (internal): `GET /v1/assignments`, a stream of JSON lines
 * with the calling node's tasks, and `POST /v1/status`, its task state reports.
 */

/** What a node needs of a task's service to run it. */
export interface AssignedService {
  ID: string;
  Name: string;
  Labels: Record<string, string>;
  /** The service's host-mode published ports: the task container's port bindings. */
  HostPorts: PortConfig[];
  /** The registry auth kept with the service (base64 JSON, as X-Registry-Auth), for a pull. */
  RegistryAuth?: string;
}

/** One task of the node, as the manager sees it now. */
export interface AssignedTask {
  Task: Omit<Task, 'Version'>;
  Service: AssignedService;
}

/** A secret or config a task of the node references: its data unsealed, base64. */
export interface AssignedObject {
  ID: string;
  Name: string;
  Data: string;
  /** `{Name: "golang"}`: the data is a template the agent expands per task (agent/templates.ts). */
  Templating?: { Name: string };
}

/** The first line of the stream: everything the node has to run. */
export interface FullAssignments {
  type: 'full';
  tasks: AssignedTask[];
  secrets: AssignedObject[];
  configs: AssignedObject[];
  managers: ManagerAddress[];
  /** The overlay networks of the node's tasks: peers and names (swarm/networks/node-overlay.ts). */
  overlay?: NodeOverlayState;
  /** The line rhythm: a ping at least this often (the dispatcher's heartbeat period, ms). */
  periodMs: number;
}

/** A change seen through the manager's watch. */
export interface AssignmentChanges {
  type: 'changes';
  /** New or changed tasks of the node. */
  tasks: AssignedTask[];
  /** Tasks no longer the node's (deleted, moved, or finished and reported). */
  removed: string[];
  secrets: AssignedObject[];
  configs: AssignedObject[];
  /** Secrets and configs no task of the node references any more. */
  removedSecrets: string[];
  removedConfigs: string[];
  /** The node's overlay picture when it changed (absent: as before). */
  overlay?: NodeOverlayState;
}

export interface AssignmentPing {
  type: 'ping';
}

/** Log subscriptions (`logs`, `logs-end`) ride the stream too: see logs/log-broker.ts. */
export type AssignmentMessage = FullAssignments | AssignmentChanges | AssignmentPing | LogStreamMessage;

/** One task state report of an agent. */
export interface StatusReport {
  TaskID: string;
  Status: TaskStatus;
  /**
   * The task's container turned unhealthy and is being stopped: it leaves its services' VIPs,
   * `tasks.<name>`, dnsrr answers and ingress ports now, before its state moves (dockerd takes a
   * task out of the load balancer before it stops the container).
   */
  Unhealthy?: boolean;
}

/** `POST /v1/status`. */
export interface StatusCall {
  Updates: StatusReport[];
}

/** Which reports were applied; the others were older than the task's state, or not the node's. */
export interface StatusAnswer {
  Applied: string[];
}

/** What the cluster API's server calls for the agents (a manager's task dispatch). */
export interface AgentApiHandlers {
  /** Streams `nodeId`'s assignments through `send` until `signal` aborts or the watch ends. */
  assignments(nodeId: string, send: (m: AssignmentMessage) => void, signal: AbortSignal): Promise<void>;
  status(nodeId: string, call: StatusCall): Promise<StatusAnswer>;
  /** `POST /v1/logs/<subscription>`: a batch of the node's task log lines. */
  publishLogs(nodeId: string, subscriptionId: string, call: LogPublishCall): Promise<LogPublishAnswer>;
  /** `POST /v1/attachments`: a container of the node joins an attachable network (its address). */
  attach(nodeId: string, call: AttachCall): Promise<AttachAnswer>;
  /** `POST /v1/attachments/release`: a container of the node left (its attachment tasks go). */
  release(nodeId: string, call: ReleaseCall): Promise<{ Released: string[] }>;
  /** `GET /v1/attachments`: the node's attachment tasks. */
  attachments(nodeId: string): Promise<NodeAttachment[]>;
}
