import { gates, versionAtLeast, versionBefore } from './versions.js';

/**
 * /info as the request's API version shows it, from the system service's answer (every field
 * any version has, with true values). Returns a new object; the answer given is not changed.
 *
 * - below 1.25: `ExecutionDriver`, and `SecurityOptions` as plain names (dockerd 1.24);
 * - from 1.42: `KernelMemory` left out (forced false under `omitempty`), `KernelMemoryTCP` left
 *   out when false; from 1.52 always;
 * - from 1.44: `CDISpecDirs`;
 * - from 1.47: `RegistryConfig.AllowNondistributableArtifacts{CIDRs,Hostnames}` left out;
 * - 1.48 and 1.49: `BridgeNfIptables`/`BridgeNfIp6tables` false; from 1.50 left out;
 * - from 1.49: `FirewallBackend`, and the `*Commit.Expected` fields left out.
 * `Containerd` (1.46), `DiscoveredDevices` (1.50) and `NRI` (1.53) never appear: berth has
 * none of them.
 */
export function shapeInfo(info: Record<string, unknown>, version: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...info };
  if (versionBefore(version, gates.removingState)) {
    out.ExecutionDriver = '<not supported>';
    out.SecurityOptions = ((info.SecurityOptions as string[] | undefined) ?? []).map(
      (o) => /name=([^,]+)/.exec(o)?.[1] ?? o,
    );
  }
  if (versionAtLeast(version, gates.kernelMemoryOmitted)) {
    delete out.KernelMemory;
    if (!out.KernelMemoryTCP || versionAtLeast(version, gates.infoKernelMemoryTcpOmitted))
      delete out.KernelMemoryTCP;
  }
  if (versionBefore(version, gates.infoCdiSpecDirs)) delete out.CDISpecDirs;
  if (versionAtLeast(version, gates.infoNondistributableOmitted) && isObject(out.RegistryConfig)) {
    const { AllowNondistributableArtifactsCIDRs, AllowNondistributableArtifactsHostnames, ...rest } =
      out.RegistryConfig;
    out.RegistryConfig = rest;
  }
  if (versionAtLeast(version, gates.infoBridgeNfOmitted)) {
    delete out.BridgeNfIptables;
    delete out.BridgeNfIp6tables;
  } else if (versionAtLeast(version, gates.infoBridgeNfFalse)) {
    out.BridgeNfIptables = false;
    out.BridgeNfIp6tables = false;
  }
  if (versionBefore(version, gates.infoFirewallBackend)) delete out.FirewallBackend;
  else {
    for (const key of ['ContainerdCommit', 'RuncCommit', 'InitCommit']) {
      const commit = out[key];
      if (isObject(commit)) {
        const { Expected, ...rest } = commit;
        out[key] = rest;
      }
    }
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
