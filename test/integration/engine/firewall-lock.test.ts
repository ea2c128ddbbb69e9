import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { HostFirewallOps } from '../../../src/engine/network/adapters/iptables.ops.js';
import { removeBridgeFromHost } from '../../../src/engine/network/host-cleanup.js';
import { hostLockAt } from '../../../src/engine/network/host-lock.js';

/**
 * The shared BERTH-* chains are made by the first bridge's rules and removed with the last's. An
 * engine adding a bridge while a teardown (tests, uninstall) removes another must never find
 * them half gone: both sides take the host lock. Bridge names that no engine uses, and no links:
 * iptables takes rules for interfaces that do not exist.
 */
describe('the firewall base chains under the host lock', () => {
  it('survive a bridge added while the last other bridge is torn down', async () => {
    const firewall = new HostFirewallOps(hostLockAt());
    const [x, y] = ['brlk-x', 'brlk-y'];
    try {
      for (let round = 0; round < 12; round++) {
        await firewall.allowBridge(x, '10.253.1.0/24');
        // one engine adds its bridge while a teardown removes the other's
        await Promise.all([firewall.allowBridge(y, '10.253.2.0/24'), removeBridgeFromHost(x)]);
        const rules = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' });
        assert.match(rules, /-A FORWARD -m comment --comment berth -j BERTH-FORWARD/, `round ${round}`);
        assert.match(rules, new RegExp(`-A BERTH-FORWARD -i ${y} .*-j ACCEPT`), `round ${round}`);
        await firewall.removeBridge(y);
      }
    } finally {
      await removeBridgeFromHost(x).catch(() => undefined);
      await firewall.removeBridge(y).catch(() => undefined);
    }
  });
});
