import { invalidParameter } from '../../../common/errors.js';
import type { TlsInfo } from '../ca/root-ca.js';
import type { SwarmServiceOptions } from '../options.js';
import type { NodeAvailability, SwarmNode } from '../swarm.types.js';

/** A Node's Description of this engine's host, as its node reports it. */
export function describeNode(opts: SwarmServiceOptions, tlsInfo: TlsInfo): SwarmNode['Description'] {
  const host = opts.describeHost();
  return {
    Hostname: host.hostname,
    Platform: { Architecture: process.arch === 'x64' ? 'x86_64' : process.arch, OS: 'linux' },
    Resources: { NanoCPUs: host.nanoCpus, MemoryBytes: host.memoryBytes },
    Engine: { EngineVersion: opts.engineVersion, Plugins: opts.plugins() },
    TLSInfo: tlsInfo,
  };
}

/** Init's and join's Availability: empty is active. */
export function parseAvailability(value: string | undefined): NodeAvailability {
  if (value === undefined || value === '') return 'active';
  if (value === 'active' || value === 'pause' || value === 'drain') return value;
  // dockerd's words (its %q of the value)
  throw invalidParameter(`invalid Availability: ${JSON.stringify(value)}`);
}
