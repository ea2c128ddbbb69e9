import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../../common/log.js';
import type { EventsService } from '../../events/events.service.js';
import type { IngressMesh, ServiceLb } from '../../network/lb/lb.types.js';
import { HostVolumeOps } from '../../volumes/mount.adapter.js';
import type { StatusAnswer } from '../cluster-api/assignments.types.js';
import { openAssignments } from '../cluster-api/assignments-client.js';
import { clusterCall } from '../cluster-api/client.js';
import type { LogPublishAnswer } from '../logs/logs.types.js';
import type { NetworkAttachments } from './attachments.js';
import type { AgentContainers, AgentImages } from './executor.js';
import type { AgentLogContainers } from './log-publisher.js';
import { NodeAgent } from './node-agent.js';
import type { OverlayPort } from './overlay-port.js';
import { TaskFiles } from './task-files.js';
import { healthEventsOf } from './task-health.js';

/** The node's agent with its real parts: the engine's containers and images, the host's mounts. */
export function createNodeAgent(opts: {
  dataRoot: string;
  execRoot: string;
  containers: AgentContainers & AgentLogContainers;
  images: AgentImages;
  log: Logger;
  attachments?: NetworkAttachments;
  overlay?: OverlayPort;
  lb?: ServiceLb;
  ingress?: IngressMesh;
  /** The engine's events (the task containers' health changes). */
  events?: Pick<EventsService, 'subscribe'>;
}): NodeAgent {
  return new NodeAgent({
    stateDir: join(opts.dataRoot, 'swarm'),
    containers: opts.containers,
    images: opts.images,
    files: new TaskFiles(join(opts.execRoot, 'swarm', 'tasks'), new HostVolumeOps()),
    hostname: () => hostname(),
    log: opts.log,
    connect: openAssignments,
    postStatus: (addr, call, tls) => clusterCall<StatusAnswer>(addr, 'POST', '/v1/status', call, tls),
    logs: {
      containers: opts.containers,
      post: (addr, id, call, tls) => clusterCall<LogPublishAnswer>(addr, 'POST', `/v1/logs/${id}`, call, tls),
    },
    ...(opts.attachments
      ? {
          attachments: {
            port: opts.attachments,
            call: (addr, method, path, body, tls) => clusterCall(addr, method, path, body, tls),
          },
        }
      : {}),
    ...(opts.overlay ? { overlay: opts.overlay } : {}),
    ...(opts.lb ? { lb: opts.lb } : {}),
    ...(opts.ingress ? { ingress: opts.ingress } : {}),
    ...(opts.events ? { health: healthEventsOf(opts.events) } : {}),
  });
}
