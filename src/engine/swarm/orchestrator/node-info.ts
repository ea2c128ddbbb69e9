import type { PortConfig, StoredService } from '../services/service.types.js';
import { isTerminal, type StoredTask } from '../tasks/task.types.js';
import type { StoredNode } from './cluster-view.js';
import { isLive } from './task-life.js';

/**
 * What the scheduler knows of a node (swarmkit's NodeInfo): its tasks of each service and in all
 * (tasks desired to run), what their reservations take, and the host-mode ports they publish.
 */
export interface NodeInfo {
  node: StoredNode;
  up: boolean;
  byService: Map<string, number>;
  total: number;
  reservedCpus: number;
  reservedMemory: number;
  hostPorts: Set<string>;
}

export function newNodeInfo(node: StoredNode, up: boolean): NodeInfo {
  return {
    node,
    up,
    byService: new Map(),
    total: 0,
    reservedCpus: 0,
    reservedMemory: 0,
    hostPorts: new Set(),
  };
}

/** The host-mode ports a service's tasks publish, as `proto/port` (only fixed ports collide). */
export function hostPortsOf(service: StoredService | undefined): string[] {
  const ports: PortConfig[] = service?.Endpoint?.Ports ?? service?.Spec.EndpointSpec?.Ports ?? [];
  return ports
    .filter((p) => p.PublishMode === 'host' && (p.PublishedPort ?? 0) > 0)
    .map((p) => `${p.Protocol ?? 'tcp'}/${p.PublishedPort}`);
}

/** Counts a task on its node's info (a task that is over holds nothing). */
export function addTask(info: NodeInfo, task: StoredTask, service: StoredService | undefined): void {
  if (isTerminal(task.Status.State)) return;
  if (isLive(task)) {
    info.byService.set(task.ServiceID, (info.byService.get(task.ServiceID) ?? 0) + 1);
    info.total++;
  }
  const r = task.Spec.Resources?.Reservations;
  info.reservedCpus += r?.NanoCPUs ?? 0;
  info.reservedMemory += r?.MemoryBytes ?? 0;
  for (const p of hostPortsOf(service)) info.hostPorts.add(p);
}
