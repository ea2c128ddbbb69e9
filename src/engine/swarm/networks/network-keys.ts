import { PREFIX } from '../keys.js';

/** Swarm networks' keys: the objects, and their addresses' claims (`P/ipam/<networkID>/<ip>`). */
export const networkKeys = {
  all: `${PREFIX}/networks/`,
  object: (id: string) => `${PREFIX}/networks/${id}`,
  ipamAll: `${PREFIX}/ipam/`,
  ipamOf: (networkId: string) => `${PREFIX}/ipam/${networkId}/`,
  ipam: (networkId: string, ip: string) => `${PREFIX}/ipam/${networkId}/${ip}`,
};

/** `P/ipam/<networkID>/<ip>` → [networkID, ip]; undefined for other keys. */
export function parseIpamKey(key: string): { networkId: string; ip: string } | undefined {
  if (!key.startsWith(networkKeys.ipamAll)) return undefined;
  const rest = key.slice(networkKeys.ipamAll.length);
  const slash = rest.indexOf('/');
  if (slash <= 0) return undefined;
  return { networkId: rest.slice(0, slash), ip: rest.slice(slash + 1) };
}
