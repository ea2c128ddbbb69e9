import type { Versioned } from '../orchestrator/cluster-view.js';
import type { NetworkAttachment } from '../tasks/task.types.js';
import { OVERLAY_VNI_OPTION, type StoredSwarmNetwork, type SwarmApiNetwork } from './network.types.js';

export function apiNetwork(n: Versioned<StoredSwarmNetwork>): SwarmApiNetwork {
  const s = n.value.Spec;
  const configs = s.IPAM.Config.map((c) => ({
    Subnet: c.Subnet,
    ...(c.IPRange ? { Range: c.IPRange } : {}),
    Gateway: c.Gateway,
  }));
  return {
    ID: n.value.ID,
    Version: { Index: n.modRevision },
    CreatedAt: n.value.CreatedAt,
    UpdatedAt: n.value.CreatedAt,
    Spec: {
      Name: s.Name,
      Labels: { ...(s.Labels ?? {}) },
      DriverConfiguration: {
        Name: s.Driver,
        ...(Object.keys(s.Options).length > 0 ? { Options: { ...s.Options } } : {}),
      },
      ...(s.Internal ? { Internal: true } : {}),
      ...(s.Attachable ? { Attachable: true } : {}),
      ...(s.Ingress ? { Ingress: true } : {}),
      IPAMOptions: { Driver: { Name: s.IPAM.Driver }, Configs: configs },
      Scope: 'swarm',
    },
    DriverState: { Name: 'overlay', Options: { [OVERLAY_VNI_OPTION]: String(n.value._.vni) } },
    IPAMOptions: { Driver: { Name: s.IPAM.Driver }, Configs: configs },
  };
}

/** The VNI of an attachment's network (its DriverState). */
export function attachmentVni(a: NetworkAttachment): number {
  return Number(a.Network.DriverState?.Options?.[OVERLAY_VNI_OPTION] ?? 0);
}
