/**
 * Tasks as moby's API shows them (api/types/swarm/task.go). A task's state only ever moves
 * forward in TASK_STATES' order; a late, older report never moves it back.
 */

import type { SwarmApiNetwork } from '../networks/network.types.js';
import type { PortConfig, TaskSpec } from '../services/service.types.js';
import type { Version } from '../swarm.types.js';

/** swarmkit's task states, in their order (api/types.proto TaskState). */
export const TASK_STATES = [
  'new',
  'allocated',
  'pending',
  'assigned',
  'accepted',
  'preparing',
  'ready',
  'starting',
  'running',
  'complete',
  'shutdown',
  'failed',
  'rejected',
  'remove',
  'orphaned',
] as const;

export type TaskState = (typeof TASK_STATES)[number];

/** A task's position in the state order: a report may only raise it. */
export function stateRank(state: TaskState): number {
  return TASK_STATES.indexOf(state);
}

/** A terminal state: the task runs no more (complete and beyond). */
export function isTerminal(state: TaskState): boolean {
  return stateRank(state) >= stateRank('complete');
}

export interface TaskStatus {
  Timestamp: string;
  State: TaskState;
  Message: string;
  Err?: string;
  ContainerStatus?: { ContainerID?: string; PID?: number; ExitCode?: number };
  PortStatus?: { Ports?: PortConfig[] };
}

export interface NetworkAttachment {
  /** The swarm API's Network object (Spec, DriverState with the VNI list, IPAMOptions). */
  Network: SwarmApiNetwork;
  Addresses: string[];
}

export interface Task {
  ID: string;
  Version: Version;
  CreatedAt: string;
  UpdatedAt: string;
  Name?: string;
  Labels: Record<string, string>;
  Spec: TaskSpec;
  ServiceID: string;
  /** Replicated services and replicated jobs: 1..N. */
  Slot?: number;
  /** Empty until the scheduler assigns the task. */
  NodeID?: string;
  Status: TaskStatus;
  DesiredState: TaskState;
  NetworksAttachments?: NetworkAttachment[];
  AssignedGenericResources?: unknown[];
  JobIteration?: Version;
}

/** What `P/tasks/<id>` holds: the Task without Version, plus private fields the API strips. */
export interface StoredTask extends Omit<Task, 'Version'> {
  _: {
    /** The service's `_.specVersion` the task was made from (the `_up-to-date` filter). */
    specVersion: number;
    /** The service's name, for the container's name `<service>.<slot|node>.<task id>`. */
    serviceName: string;
    /**
     * A network-attachment task: the names its container answers to on the network (its name,
     * its short ID, the endpoint's aliases), for the embedded DNS of every node on it.
     */
    names?: string[];
    /** Its node said its container turned unhealthy: no longer a backend, whatever its state. */
    unhealthy?: boolean;
  };
}

/**
 * A network-attachment task (`Spec.NetworkAttachmentSpec`, Runtime `attachment`): a plain
 * container's address on an attachable overlay network, held for it by its node; no service,
 * never run by an agent, gone when the container leaves the network.
 */
export function isAttachment(t: { Spec: TaskSpec }): boolean {
  return t.Spec.NetworkAttachmentSpec !== undefined;
}
