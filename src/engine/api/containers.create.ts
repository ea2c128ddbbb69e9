import type { ContainerConfig, EndpointSettings, HostConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import type { CreateOptions } from '../containers/core/create.js';
import type { NetworkingConfig } from '../containers/core/record.types.js';
import { decodeCreateJson } from './schema/containers.schema.js';
import { gates, versionAtLeast, versionBefore } from './versions.js';

/**
 * POST /containers/create by API version, as moby's router adapts a request before the daemon
 * sees it: the fields an older version did not have are dropped or refused, the legacy ones
 * migrated (a container-wide MAC address, interface sysctls), and the router's warnings made.
 * What is left for the backend are plain options (CreateOptions).
 */

export interface DecodedCreate {
  config: ContainerConfig;
  hostConfig: HostConfig;
  networkingConfig: NetworkingConfig;
  options: CreateOptions;
  /** The router's warnings, after the backend's in the answer (dockerd's order). */
  warnings: string[];
}

/** The per-endpoint sysctls option (API 1.46). */
const ENDPOINT_SYSCTLS = 'com.docker.network.endpoint.sysctls';

export function decodeCreateRequest(body: Record<string, unknown>, version: string): DecodedCreate {
  const decoded = decodeCreateJson(body);
  if (!decoded.config) throw invalidParameter('Config cannot be empty in order to create a container');
  const config = decoded.config;
  const hostConfig = decoded.hostConfig ?? {};
  const networkingConfig = decoded.networkingConfig ?? {};
  const before = (gate: string) => versionBefore(version, gate);
  const mounts = hostConfig.Mounts ?? [];
  const warnings: string[] = [];

  if (before(gates.multiplexedStreamType)) {
    // 1.42: ConsoleSize honoured on Linux, BindOptions.CreateMountpoint
    if (hostConfig.ConsoleSize) hostConfig.ConsoleSize = [0, 0];
    for (const m of mounts) if (m?.BindOptions) m.BindOptions.CreateMountpoint = false;
  }
  if (before(gates.containerAnnotations)) delete hostConfig.Annotations;
  if (before(gates.endpointMacAddress)) {
    if (config.Healthcheck) delete config.Healthcheck.StartInterval;
    for (const m of mounts) {
      if (m?.BindOptions?.ReadOnlyForceRecursive) {
        throw invalidParameter('BindOptions.ReadOnlyForceRecursive needs API v1.44 or newer');
      }
    }
    const endpoints = Object.keys(networkingConfig.EndpointsConfig ?? {});
    if (endpoints.length > 1) {
      throw invalidParameter(
        `Container cannot be created with multiple network endpoints: ${endpoints.sort().join(', ')}`,
      );
    }
  }
  if (before(gates.volumeSubpath)) {
    for (const m of mounts) {
      if (m?.VolumeOptions?.Subpath) throw invalidParameter('VolumeOptions.Subpath needs API v1.45 or newer');
    }
  }
  if (before(gates.imageMounts)) {
    for (const ep of Object.values(networkingConfig.EndpointsConfig ?? {})) if (ep) ep.GwPriority = 0;
    for (const m of mounts) {
      if (m?.Type === 'image') throw invalidParameter('Mount type "Image" needs API v1.48 or newer');
    }
  }
  const volumeDriver = volumeDriverWarning(hostConfig, version);
  if (volumeDriver) warnings.push(volumeDriver);
  const mac = macAddressBC(config, hostConfig, networkingConfig, version);
  if (mac) warnings.push(mac);
  const sysctls = sysctlBC(hostConfig, networkingConfig, version);
  if (sysctls) warnings.push(sysctls);
  const ports = portBindingsBC(hostConfig, version);
  if (ports) warnings.push(ports);

  return {
    config,
    hostConfig,
    networkingConfig,
    warnings,
    options: {
      defaultIpcMode: versionAtLeast(version, gates.ipcPrivateDefault) ? 'private' : 'shareable',
      kernelMemory: before(gates.kernelMemoryOmitted),
      readOnlyNonRecursive: before(gates.endpointMacAddress),
      defaultNetworkIsBridge: versionAtLeast(version, gates.volumeSubpath),
    },
  };
}

/** 1.48: a container-wide volume driver does not apply to `volume` Mounts (dockerd warns). */
function volumeDriverWarning(hc: HostConfig, version: string): string | undefined {
  if (!hc.VolumeDriver || versionBefore(version, gates.volumeDriverWarning)) return undefined;
  const ignored = (hc.Mounts ?? []).some((m) => m?.Type === 'volume' && !m.VolumeOptions?.DriverConfig?.Name);
  return ignored
    ? "WARNING: the container-wide volume-driver configuration is ignored for volumes specified via 'mount'. Use '--mount type=volume,volume-driver=...' instead"
    : undefined;
}

/** The network a NetworkMode names, as EndpointsConfig keys it (`default` is the bridge). */
function networkName(mode: string | undefined): string {
  return !mode || mode === 'default' ? 'bridge' : mode;
}

function isPrivateNetwork(mode: string | undefined): boolean {
  return mode !== 'host' && !mode?.startsWith('container:');
}

function onBridgeOrUserNetwork(mode: string | undefined): boolean {
  return !['host', 'none'].includes(mode ?? '') && !mode?.startsWith('container:');
}

/**
 * The endpoint settings of the container's own network (moby's epConfigForNetMode): made when
 * there are none; the one entry before 1.44; else the entry of NetworkMode's name or a 400.
 */
function endpointForMode(hc: HostConfig, nc: NetworkingConfig, version: string): EndpointSettings {
  const eps = nc.EndpointsConfig ?? {};
  const name = networkName(hc.NetworkMode);
  const keys = Object.keys(eps);
  if (keys.length === 0) {
    const ep: EndpointSettings = {};
    nc.EndpointsConfig = { [name]: ep };
    return ep;
  }
  if (versionBefore(version, gates.endpointMacAddress)) {
    const key = keys[0] as string;
    eps[key] ??= {};
    return eps[key] as EndpointSettings;
  }
  const ep = eps[name] ?? (name === 'bridge' ? eps.default : undefined);
  if (!ep) {
    throw invalidParameter(
      'HostConfig.NetworkMode must match the identity of a network in NetworkSettings.Networks',
    );
  }
  return ep;
}

/**
 * Config.MacAddress (container-wide) against the endpoint MAC addresses of API 1.44: before 1.44
 * it moves to the container's network (an endpoint MAC given alone is ignored, as the old API
 * did); 1.44-1.51 it moves there with dockerd's deprecation warning (a different endpoint MAC is
 * a 400); from 1.52 it is ignored.
 */
function macAddressBC(
  config: ContainerConfig,
  hc: HostConfig,
  nc: NetworkingConfig,
  version: string,
): string | undefined {
  const mac = config.MacAddress ?? '';
  if (versionAtLeast(version, gates.containerMacIgnored)) {
    delete config.MacAddress;
    return undefined;
  }
  if (versionBefore(version, gates.endpointMacAddress)) {
    if (!mac) {
      for (const ep of Object.values(nc.EndpointsConfig ?? {})) if (ep) delete ep.MacAddress;
      return undefined;
    }
    if (!onBridgeOrUserNetwork(hc.NetworkMode)) {
      throw invalidParameter('conflicting options: mac-address and the network mode');
    }
    endpointForMode(hc, nc, version).MacAddress = mac;
    return undefined;
  }
  if (!mac) return undefined;
  if (onBridgeOrUserNetwork(hc.NetworkMode)) {
    const ep = endpointForMode(hc, nc, version);
    if (!ep.MacAddress) ep.MacAddress = mac;
    else if (ep.MacAddress.toLowerCase().replaceAll('-', ':') !== mac.toLowerCase().replaceAll('-', ':')) {
      throw invalidParameter(
        'the container-wide MAC address must match the endpoint-specific MAC address for the main network, or be left empty',
      );
    }
  }
  return 'The container-wide MacAddress field is now deprecated. It should be specified in EndpointsConfig instead.';
}

/**
 * Interface sysctls given container-wide (`net.ipv4.conf.eth0.x`): up to 1.47 those of eth0 move
 * to the container's endpoint (DriverOpts com.docker.network.endpoint.sysctls, `IFNAME` for the
 * interface) with dockerd's warning, any other interface is a 400; from 1.48 they are a 400.
 */
function sysctlBC(hc: HostConfig, nc: NetworkingConfig, version: string): string | undefined {
  if (!isPrivateNetwork(hc.NetworkMode) || !hc.Sysctls) return undefined;
  const moved: string[] = [];
  const settings: string[] = [];
  let ep: EndpointSettings | undefined;
  for (const [k, v] of Object.entries(hc.Sysctls).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const spl = k.split('.');
    if (spl.length < 5 || spl[0] !== 'net' || !spl[3]?.startsWith('eth')) continue;
    const rest = spl.slice(4).join('.');
    if (!ep) {
      if (versionAtLeast(version, gates.interfaceSysctlsRefused)) {
        throw invalidParameter(
          `interface specific sysctl setting "${k}" must be supplied using driver option '${ENDPOINT_SYSCTLS}'`,
        );
      }
      try {
        ep = endpointForMode(hc, nc, version);
      } catch (err) {
        throw invalidParameter(`unable to find a network for sysctl ${k}: ${(err as Error).message}`);
      }
    }
    if (spl[3] !== 'eth0') {
      throw invalidParameter(
        `unable to determine network endpoint for sysctl ${k}, use driver option '${ENDPOINT_SYSCTLS}' to set per-interface sysctls`,
      );
    }
    moved.push(k);
    settings.push(`net.${spl[1]}.${spl[2]}.IFNAME.${rest}=${v}`);
  }
  if (!ep) return undefined;
  const migrated = settings.join(',');
  const warning = `Migrated sysctl ${JSON.stringify(moved.join(','))} to DriverOpts{${JSON.stringify(ENDPOINT_SYSCTLS)}:${JSON.stringify(migrated)}}.`;
  const opts = { ...(ep.DriverOpts ?? {}) };
  opts[ENDPOINT_SYSCTLS] = opts[ENDPOINT_SYSCTLS] ? `${migrated},${opts[ENDPOINT_SYSCTLS]}` : migrated;
  ep.DriverOpts = opts;
  for (const k of moved) delete hc.Sysctls[k];
  return warning;
}

/** From 1.52 dockerd warns that empty lists of port bindings will be dropped one day. */
function portBindingsBC(hc: HostConfig, version: string): string | undefined {
  if (versionBefore(version, gates.emptyPortBindingsWarning)) return undefined;
  const empty = Object.entries(hc.PortBindings ?? {})
    .filter(([, bindings]) => !bindings || bindings.length === 0)
    .map(([port]) => port);
  if (!empty.length) return undefined;
  return `Following container port(s) have an empty list of port-bindings: ${empty.sort().join(', ')}. Such bindings will be discarded in a future version.`;
}
