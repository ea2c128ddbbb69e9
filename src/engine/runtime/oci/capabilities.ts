import { invalidParameter } from '../../../common/errors.js';
import { capabilityNames } from './host.js';
import type { OciCapabilities } from './spec.types.js';

/** Docker's default capability set (moby oci/caps/defaults.go). */
export const defaultCapabilities: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];

const known = new Set<string>(capabilityNames);

/** Upper-case, add `CAP_`, validate; `ALL` stays `ALL`. */
export function normalizeCapabilities(caps: readonly string[]): string[] {
  return caps.map((raw) => {
    let c = raw.trim().toUpperCase();
    if (c === 'ALL') return c;
    if (!c.startsWith('CAP_')) c = `CAP_${c}`;
    if (!known.has(c)) throw invalidParameter(`unknown capability: "${c}"`);
    return c;
  });
}

/**
 * The container's capabilities from the defaults, CapAdd, CapDrop and Privileged (moby's
 * TweakCapabilities), limited to what the daemon itself holds (`bound`).
 */
export function tweakCapabilities(
  adds: readonly string[] | null | undefined,
  drops: readonly string[] | null | undefined,
  privileged: boolean,
  bound?: Set<string>,
): string[] {
  let caps: string[];
  const capAdd = normalizeCapabilities(adds ?? []);
  const capDrop = normalizeCapabilities(drops ?? []);
  if (privileged) caps = [...capabilityNames];
  else if (capAdd.includes('ALL')) caps = capabilityNames.filter((c) => !capDrop.includes(c));
  else if (capDrop.includes('ALL')) caps = [...capAdd];
  else caps = [...defaultCapabilities.filter((c) => !capDrop.includes(c)), ...capAdd];
  const unique = [...new Set(caps)];
  return bound ? unique.filter((c) => bound.has(c)) : unique;
}

/** process.capabilities for a user: root gets effective/permitted, others only bounding (moby). */
export function capabilitySets(caps: string[], uid: number): OciCapabilities {
  if (uid === 0) return { bounding: caps, effective: caps, permitted: caps };
  return { bounding: caps };
}
