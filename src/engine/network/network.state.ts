import { readFile } from 'node:fs/promises';
import { errnoCode } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/fs/atomic.js';
import { randomId } from '../../common/ids.js';
import type { IpamConfigEntry } from './network.types.js';

/**
 * `<data-root>/network/networks.json`: the predefined networks' IDs and creation times, and the
 * default bridge's address block, so that they stay the same across engine restarts.
 */

export interface SavedNetwork {
  id: string;
  created: string;
}

export interface SavedBridge extends SavedNetwork {
  name: string;
  subnet: string;
  gateway: string;
  gatewayInConfig: boolean;
}

/** A user-defined bridge network, as made (its IPAM configs with the gateways chosen). */
export interface SavedUserNetwork extends SavedNetwork {
  name: string;
  /** The Linux bridge (`br-` and the ID's first 12 digits unless the options name one). */
  bridge: string;
  internal: boolean;
  attachable: boolean;
  enableIPv6: boolean;
  ipamOptions: Record<string, string> | null;
  /** IPv4 configs (each with its Gateway), then IPv6 ones. */
  ipam: IpamConfigEntry[];
  options: Record<string, string>;
  labels: Record<string, string>;
  icc: boolean;
  masquerade: boolean;
  mtu?: number;
  /** The block was picked from the default pools (static addresses are refused, as dockerd). */
  autoSubnet?: boolean;
  /** Blocks given without a gateway: inspect shows no Gateway for them (dockerd picks `.1` silently). */
  implicitGateways?: string[];
}

export interface SavedNetworks {
  bridge?: SavedBridge;
  host: SavedNetwork;
  none: SavedNetwork;
  /** User-defined networks, in creation order. */
  user: SavedUserNetwork[];
}

function validUser(n: unknown): n is SavedUserNetwork {
  const x = n as SavedUserNetwork | undefined;
  return valid(x) && typeof x.name === 'string' && typeof x.bridge === 'string' && Array.isArray(x.ipam);
}

function fresh(): SavedNetwork {
  return { id: randomId(), created: new Date().toISOString() };
}

function valid(n: unknown): n is SavedNetwork {
  const x = n as SavedNetwork | undefined;
  return typeof x?.id === 'string' && /^[0-9a-f]{64}$/.test(x.id) && typeof x.created === 'string';
}

export async function loadNetworks(path: string): Promise<SavedNetworks> {
  let raw: Partial<SavedNetworks> = {};
  try {
    raw = JSON.parse(await readFile(path, 'utf8')) as Partial<SavedNetworks>;
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT' && !(err instanceof SyntaxError)) throw err;
  }
  const out: SavedNetworks = {
    host: valid(raw.host) ? raw.host : fresh(),
    none: valid(raw.none) ? raw.none : fresh(),
    user: Array.isArray(raw.user) ? raw.user.filter(validUser) : [],
  };
  const b = raw.bridge;
  if (
    valid(b) &&
    typeof b.name === 'string' &&
    typeof b.subnet === 'string' &&
    typeof b.gateway === 'string'
  ) {
    out.bridge = { ...b, gatewayInConfig: b.gatewayInConfig === true };
  }
  return out;
}

export async function saveNetworks(path: string, n: SavedNetworks): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(n, null, 2)}\n`);
}

export function newNetworkIdentity(): SavedNetwork {
  return fresh();
}
