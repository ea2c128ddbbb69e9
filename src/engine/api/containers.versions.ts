import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import type { NetworkingConfig } from '../containers/core/record.types.js';
import type {
  ContainerInspect,
  ContainerSummary,
  EndpointView,
  NetworkSettingsView,
} from '../containers/core/views.types.js';
import { decodeCreateJson } from './schema/containers.schema.js';
import { gates, versionAtLeast } from './versions.js';

/**
 * What the containers endpoints change by API version: the create body's fields, and the inspect
 * and list views (made for the newest version) as an older client sees them. Shaping never
 * changes the view it is given: it makes new objects where something goes.
 */

/**
 * The create body as dockerd decodes it (types, key case, legacy top-level HostConfig fields: see
 * schema/containers.schema.ts), with the fields the request's API version does not have dropped.
 */
export function decodeCreateBody(
  body: Record<string, unknown>,
  version: string,
): { config: ContainerConfig; hostConfig: HostConfig; networkingConfig: NetworkingConfig } {
  const decoded = decodeCreateJson(body);
  if (!decoded.config) throw invalidParameter('Config cannot be empty in order to create a container');
  const config = decoded.config;
  const hostConfig = decoded.hostConfig ?? {};
  const networkingConfig = decoded.networkingConfig ?? {};
  if (!versionAtLeast(version, gates.containerAnnotations)) delete hostConfig.Annotations;
  if (!versionAtLeast(version, gates.endpointMacAddress) && config.Healthcheck) {
    delete config.Healthcheck.StartInterval;
  }
  return { config, hostConfig, networkingConfig };
}

/** The Networks map without DNSNames (before 1.44): new endpoints, the view's own untouched. */
function withoutDnsNames(networks: Record<string, EndpointView>): Record<string, EndpointView> {
  const out: Record<string, EndpointView> = {};
  for (const [name, ep] of Object.entries(networks)) out[name] = { ...ep, DNSNames: undefined };
  return out;
}

function shapeNetworkSettings(ns: NetworkSettingsView, version: string): NetworkSettingsView {
  if (versionAtLeast(version, gates.endpointDnsNames)) return ns;
  return { ...ns, Networks: withoutDnsNames(ns.Networks) };
}

/**
 * HostConfig as the request's version shows it: Annotations only from 1.43, KernelMemory and
 * KernelMemoryTCP left out when zero from 1.42 (dockerd's omitempty). The view's own when
 * nothing goes (keys set to undefined are left out of the JSON).
 */
function shapeHostConfig(hc: HostConfig, version: string): HostConfig {
  const dropAnnotations =
    hc.Annotations !== undefined && !versionAtLeast(version, gates.containerAnnotations);
  const omitKernel = versionAtLeast(version, gates.kernelMemoryOmitted);
  const dropKernel = omitKernel && !hc.KernelMemory;
  const dropKernelTcp = omitKernel && !hc.KernelMemoryTCP;
  if (!dropAnnotations && !dropKernel && !dropKernelTcp) return hc;
  const out = { ...hc };
  if (dropAnnotations) out.Annotations = undefined;
  if (dropKernel) out.KernelMemory = undefined;
  if (dropKernelTcp) out.KernelMemoryTCP = undefined;
  return out;
}

/** Inspect as the request's API version shows it. */
export function shapeInspect(view: ContainerInspect, version: string): ContainerInspect {
  return {
    ...view,
    HostConfig: shapeHostConfig(view.HostConfig, version),
    NetworkSettings: shapeNetworkSettings(view.NetworkSettings, version),
  };
}

/** A list row as the request's API version shows it. */
export function shapeListItem(item: ContainerSummary, version: string): ContainerSummary {
  const networks = versionAtLeast(version, gates.endpointDnsNames)
    ? item.NetworkSettings
    : { Networks: withoutDnsNames(item.NetworkSettings.Networks) };
  const hostConfig =
    item.HostConfig.Annotations !== undefined && !versionAtLeast(version, gates.containerAnnotations)
      ? { ...item.HostConfig, Annotations: undefined }
      : item.HostConfig;
  return { ...item, HostConfig: hostConfig, NetworkSettings: networks };
}
