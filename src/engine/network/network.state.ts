import { readFile } from 'node:fs/promises';
import { errnoCode } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/fs/atomic.js';
import { randomId } from '../../common/ids.js';

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

export interface SavedNetworks {
  bridge?: SavedBridge;
  host: SavedNetwork;
  none: SavedNetwork;
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
