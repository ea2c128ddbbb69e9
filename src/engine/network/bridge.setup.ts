import { invalidParameter } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { LinkOps } from './adapters/iproute.ops.js';
import type { FirewallOps } from './adapters/iptables.ops.js';
import { withHostLock } from './host-lock.js';
import { overlaps, parseCidr } from './ipv4.js';
import type { SavedBridge } from './network.state.js';
import { choiceFromAddress, parseBip, pickSubnet, type SubnetChoice } from './subnet.js';

export const DEFAULT_BRIDGE = 'berth0';

/** Interface names: at most 15 bytes (IFNAMSIZ - 1), no slash, no whitespace, not `.`/`..`. */
export function validateBridgeName(name: string): void {
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$/.test(name)) {
    throw invalidParameter(
      `invalid bridge name ${JSON.stringify(name)}: 1 to 15 characters of [a-zA-Z0-9_.-], starting with a letter or digit`,
    );
  }
}

export interface BridgeSetupOptions {
  name: string;
  /** `--bip`: the bridge's address and prefix length. */
  bip?: string;
  /** What the engine chose last time (networks.json). */
  saved?: SavedBridge;
  link: LinkOps;
  firewall: FirewallOps;
  /** The host-wide lock held while picking a free block. */
  lockPath: string;
  log: Logger;
}

export interface BridgeSetup extends SubnetChoice {
  name: string;
  gatewayInConfig: boolean;
}

/**
 * Make the default bridge ready, as dockerd does for docker0: the block is `--bip`'s, else the one
 * chosen before (kept across restarts), else the bridge's own address when it exists with one,
 * else the first default pool that collides with no route or address of the host (picked under
 * a host-wide lock, and given to the bridge before the lock is let go). The bridge is created
 * when missing, gets its address, is brought up, may forward (FORWARD rules), and what leaves its
 * block through another interface is masqueraded (one nat rule).
 */
export async function setupBridge(o: BridgeSetupOptions): Promise<BridgeSetup> {
  validateBridgeName(o.name);
  const current = await o.link.link(o.name);
  if (current && current.kind !== 'bridge') {
    throw invalidParameter(`cannot use ${o.name} as the default bridge: it exists and is not a bridge`);
  }
  let setup: BridgeSetup | undefined;
  if (o.bip) {
    const choice = parseBip(o.bip);
    const drop = (current?.addresses ?? []).filter(
      (a) => a.address !== choice.gateway || a.prefixLen !== choice.prefixLen,
    );
    await o.link.ensureBridge(o.name, { address: choice.gateway, prefixLen: choice.prefixLen }, drop);
    setup = { ...choice, name: o.name, gatewayInConfig: true };
  } else if (current && current.addresses.length > 0) {
    const saved = o.saved?.name === o.name ? o.saved : undefined;
    const own = current.addresses.find((a) => saved && a.address === saved.gateway) ?? current.addresses[0];
    const choice = own && choiceFromAddress(own.address, own.prefixLen);
    if (!choice) throw invalidParameter(`cannot read the address of bridge ${o.name}`);
    await o.link.ensureBridge(o.name, { address: choice.gateway, prefixLen: choice.prefixLen }, []);
    // as dockerd: a bridge found with its address shows that address as the gateway (docker0 on a
    // restart), one the engine had to make does not
    setup = { ...choice, name: o.name, gatewayInConfig: true };
  } else {
    setup = await withHostLock(o.lockPath, async () => {
      const used = await o.link.usedBlocks();
      const saved = o.saved?.name === o.name ? savedChoice(o.saved) : undefined;
      let choice = saved;
      if (saved && used.some((u) => overlapsBlock(u, saved.subnet))) {
        o.log.warn('the bridge block chosen before is in use on the host now: picking another', {
          bridge: o.name,
          subnet: saved.subnet,
        });
        choice = undefined;
      }
      choice ??= pickSubnet(used);
      await o.link.ensureBridge(o.name, { address: choice.gateway, prefixLen: choice.prefixLen }, []);
      return {
        ...choice,
        name: o.name,
        gatewayInConfig: saved !== undefined && choice === saved && o.saved?.gatewayInConfig === true,
      };
    });
  }
  await o.firewall.allowBridge(o.name, setup.subnet);
  return setup;
}

function savedChoice(s: SavedBridge): SubnetChoice | undefined {
  const c = parseCidr(s.subnet);
  if (!c || !parseCidr(s.gateway)) return undefined;
  return { subnet: s.subnet, gateway: s.gateway, prefixLen: c.prefixLen };
}

function overlapsBlock(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  return x !== undefined && y !== undefined && overlaps(x, y);
}
