import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import type {
  ContainerInspect,
  ContainerSummary,
  EndpointView,
  NetworkSettingsView,
} from '../containers/core/views.types.js';
import { gates, versionAtLeast } from './versions.js';

/**
 * The inspect and list views (made for the newest version) as the request's API version shows
 * them: dockerd 20.10's shape up to 1.41, then each version's additions and removals. Shaping
 * never changes the view it is given: it makes new objects where something goes (keys set to
 * undefined are left out of the JSON).
 */

/**
 * An endpoint without what the version does not have: DNSNames (1.44), GwPriority (1.48); before
 * 1.45 the Aliases of a user-defined network's endpoint end with the container's short ID.
 */
function shapeEndpoints(
  networks: Record<string, EndpointView>,
  version: string,
  containerId: string,
): Record<string, EndpointView> {
  const dns = versionAtLeast(version, gates.endpointDnsNames);
  const gw = versionAtLeast(version, gates.endpointGwPriority);
  const bare = versionAtLeast(version, gates.aliasesWithoutShortId);
  if (dns && gw && bare) return networks;
  const short = containerId.slice(0, 12);
  const out: Record<string, EndpointView> = {};
  for (const [name, ep] of Object.entries(networks)) {
    // DNSNames are there on user-defined networks only
    const aliases =
      !bare && ep.DNSNames ? [...(ep.Aliases ?? []).filter((a) => a !== short), short] : ep.Aliases;
    out[name] = {
      ...ep,
      Aliases: aliases,
      DNSNames: dns ? ep.DNSNames : undefined,
      GwPriority: gw ? ep.GwPriority : undefined,
    };
  }
  return out;
}

/**
 * NetworkSettings: from 1.52 only SandboxID, SandboxKey, Ports and Networks (docker 29); before,
 * dockerd 20.10's set with the default bridge's address at the top.
 */
function shapeNetworkSettings(ns: NetworkSettingsView, version: string, id: string): NetworkSettingsView {
  const Networks = shapeEndpoints(ns.Networks, version, id);
  if (versionAtLeast(version, gates.networkSettingsTrimmed)) {
    return { SandboxID: ns.SandboxID, SandboxKey: ns.SandboxKey, Ports: ns.Ports, Networks };
  }
  return Networks === ns.Networks ? ns : { ...ns, Networks };
}

/**
 * HostConfig: Annotations only from 1.43, KernelMemory and KernelMemoryTCP left out when zero
 * from 1.42 (dockerd's omitempty) and gone from 1.52.
 */
function shapeHostConfig(hc: HostConfig, version: string): HostConfig {
  const dropAnnotations =
    hc.Annotations !== undefined && !versionAtLeast(version, gates.containerAnnotations);
  const gone = versionAtLeast(version, gates.networkSettingsTrimmed);
  const omitKernel = versionAtLeast(version, gates.kernelMemoryOmitted);
  const dropKernel = gone || (omitKernel && !hc.KernelMemory);
  const dropKernelTcp = gone || (omitKernel && !hc.KernelMemoryTCP);
  if (!dropAnnotations && !dropKernel && !dropKernelTcp) return hc;
  const out = { ...hc };
  if (dropAnnotations) out.Annotations = undefined;
  if (dropKernel) out.KernelMemory = undefined;
  if (dropKernelTcp) out.KernelMemoryTCP = undefined;
  return out;
}

/** Config: from 1.52 an empty OnBuild and the container-wide MacAddress are left out. */
function shapeConfig(config: ContainerConfig, version: string): ContainerConfig {
  if (!versionAtLeast(version, gates.networkSettingsTrimmed)) return config;
  if (config.OnBuild?.length && config.MacAddress === undefined) return config;
  return { ...config, OnBuild: config.OnBuild?.length ? config.OnBuild : undefined, MacAddress: undefined };
}

/** Inspect as the request's API version shows it. */
export function shapeInspect(view: ContainerInspect, version: string): ContainerInspect {
  return {
    ...view,
    HostConfig: shapeHostConfig(view.HostConfig, version),
    Config: shapeConfig(view.Config, version),
    NetworkSettings: shapeNetworkSettings(view.NetworkSettings, version, view.Id),
  };
}

/** A list row as the request's API version shows it: Annotations from 1.46, Health from 1.52. */
export function shapeListItem(item: ContainerSummary, version: string): ContainerSummary {
  const Networks = shapeEndpoints(item.NetworkSettings.Networks, version, item.Id);
  const hostConfig =
    item.HostConfig.Annotations !== undefined && !versionAtLeast(version, gates.listAnnotations)
      ? { ...item.HostConfig, Annotations: undefined }
      : item.HostConfig;
  return {
    ...item,
    HostConfig: hostConfig,
    NetworkSettings: Networks === item.NetworkSettings.Networks ? item.NetworkSettings : { Networks },
    Health: versionAtLeast(version, gates.listHealth) ? item.Health : undefined,
  };
}
