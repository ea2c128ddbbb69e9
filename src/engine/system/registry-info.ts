/**
 * `docker info`'s registry part as dockerd 20.10's registry service config shows it
 * (registry.ServiceConfig from LoadInsecureRegistries and LoadMirrors): the insecure CIDRs as
 * given then 127.0.0.0/8 (always insecure), one IndexConfig per insecure host and one for
 * docker.io with the mirrors, the mirrors with one trailing slash.
 */

export const INDEX_SERVER_ADDRESS = 'https://index.docker.io/v1/';

/** What dockerd always treats as insecure. */
export const LOOPBACK_CIDR = '127.0.0.0/8';

export interface IndexInfo {
  Name: string;
  Mirrors: string[];
  Secure: boolean;
  Official: boolean;
}

export interface RegistryInfo {
  AllowNondistributableArtifactsCIDRs: string[];
  AllowNondistributableArtifactsHostnames: string[];
  InsecureRegistryCIDRs: string[];
  IndexConfigs: Record<string, IndexInfo>;
  Mirrors: string[];
}

/** A mirror URL as dockerd keeps it: one trailing slash. */
export function normalizeMirror(url: string): string {
  return `${url.replace(/\/+$/, '')}/`;
}

/** Whether an insecure-registry entry is a CIDR (else a host[:port]). */
export function isCidr(entry: string): boolean {
  return /^[0-9a-fA-F.:]+\/\d{1,3}$/.test(entry);
}

/** The RegistryConfig of /info from the engine's insecure registries and mirrors. */
export function registryInfo(
  insecureRegistries: readonly string[],
  mirrors: readonly string[],
): RegistryInfo {
  const cidrs: string[] = [];
  const hosts: string[] = [];
  for (const entry of [...insecureRegistries.filter((r) => r !== LOOPBACK_CIDR), LOOPBACK_CIDR]) {
    const list = isCidr(entry) ? cidrs : hosts;
    if (!list.includes(entry)) list.push(entry);
  }
  const normalized = mirrors.map(normalizeMirror);
  const configs: Record<string, IndexInfo> = {};
  for (const h of hosts) configs[h] = { Name: h, Mirrors: [], Secure: false, Official: false };
  configs['docker.io'] = { Name: 'docker.io', Mirrors: normalized, Secure: true, Official: true };
  // Go writes a map's keys sorted
  const IndexConfigs: Record<string, IndexInfo> = {};
  for (const k of Object.keys(configs).sort()) IndexConfigs[k] = configs[k] as IndexInfo;
  return {
    AllowNondistributableArtifactsCIDRs: [],
    AllowNondistributableArtifactsHostnames: [],
    InsecureRegistryCIDRs: cidrs,
    IndexConfigs,
    Mirrors: normalized,
  };
}
