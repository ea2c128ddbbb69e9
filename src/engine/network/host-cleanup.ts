import { join } from 'node:path';
import { HostLinkOps, type LinkOps } from './adapters/iproute.ops.js';
import { type FirewallOps, HostFirewallOps } from './adapters/iptables.ops.js';
import type { PortRuleOps } from './adapters/port-rules.ops.js';
import { hostLockAt } from './host-lock.js';
import { loadNetworks } from './network.state.js';
import { removeBridgePorts } from './ports/port-publisher.js';

/**
 * Remove from the host what an engine made for its default bridge: its port publishing rules, its
 * FORWARD and MASQUERADE rules, and the bridge.
 * The engine keeps them across restarts (live restore); this is for tearing an engine down for
 * good (tests, uninstall). The shared chains go under the host lock every engine takes for them,
 * so an engine adding a bridge meanwhile never finds them half gone. Sandboxes are files under
 * the engine's exec root (unmount those).
 */
export async function removeBridgeFromHost(
  bridge: string,
  ops: { link?: LinkOps; firewall?: FirewallOps; portRules?: PortRuleOps } = {},
): Promise<void> {
  const firewall = ops.firewall ?? new HostFirewallOps(hostLockAt());
  const link = ops.link ?? new HostLinkOps();
  await removeBridgePorts(bridge, ops.portRules);
  await firewall.removeBridge(bridge);
  await link.deleteLink(bridge);
}

/**
 * Remove from the host the bridges and rules of an engine's user-defined networks (read from its
 * data root before that is deleted): tearing an engine down for good.
 */
export async function removeUserNetworksFromHost(
  dataRoot: string,
  ops: { link?: LinkOps; firewall?: FirewallOps; portRules?: PortRuleOps } = {},
): Promise<string[]> {
  const saved = await loadNetworks(join(dataRoot, 'network', 'networks.json'));
  for (const u of saved.user) await removeBridgeFromHost(u.bridge, ops);
  return saved.user.map((u) => u.bridge);
}
