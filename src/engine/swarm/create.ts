import { availableParallelism, hostname, totalmem } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../common/log.js';
import { BERTH_VERSION } from '../../common/version.js';
import type { EngineConfig } from '../config.js';
import type { EventsService } from '../events/events.service.js';
import { hostInterfaces } from './addresses.js';
import { hostEtcdProcesses } from './etcd/etcd-process.js';
import { waitForEtcd } from './etcd/etcd-ready.js';
import { EtcdSupervisor } from './etcd/etcd-supervisor.js';
import { OrchestratorLoop } from './orchestrator/manager-loop.js';
import { EtcdStore } from './store/etcd-store.js';
import { SwarmService } from './swarm.service.js';

/** The swarm service with its real parts: etcd under the supervisor, the host's interfaces. */
export function createSwarmService(config: EngineConfig, events: EventsService, log: Logger): SwarmService {
  const member = new EtcdSupervisor({
    binary: config.swarmEtcdBinary,
    runDir: join(config.execRoot, 'swarm'),
    host: hostEtcdProcesses,
    log: log.child('etcd'),
    ready: waitForEtcd,
  });
  return new SwarmService({
    dataRoot: config.dataRoot,
    engineVersion: BERTH_VERSION,
    peerPort: config.swarmEtcdPeerPort,
    member,
    openStore: (socketPath) => new EtcdStore({ socketPath }),
    interfaces: hostInterfaces,
    describeHost: () => ({
      hostname: hostname(),
      nanoCpus: availableParallelism() * 1e9,
      memoryBytes: totalmem(),
    }),
    // the plugins dockerd lists for a node; berth's own (its /info's Plugins)
    plugins: () => [
      { Type: 'Log', Name: 'json-file' },
      { Type: 'Log', Name: 'local' },
      { Type: 'Network', Name: 'bridge' },
      { Type: 'Network', Name: 'host' },
      { Type: 'Network', Name: 'null' },
      { Type: 'Volume', Name: 'local' },
    ],
    log,
    loops: new OrchestratorLoop(),
    publish: (type, action, id, attributes) => events.publish(type, action, id, attributes, 'swarm'),
  });
}
