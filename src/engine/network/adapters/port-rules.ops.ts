import { writeFile } from 'node:fs/promises';
import { errnoCode, systemError } from '../../../common/errors.js';
import { runTool } from '../../../common/host/run-tool.js';

/**
 * What port publishing asks of the host's firewall: iptables-restore of the rules port-rules.ts
 * writes, iptables-save to find what a crashed engine left, and the bridge's route_localnet
 * (loopback DNAT into the bridge). Unit tests substitute a fake; the engine runs the tools (no
 * shell).
 */
export interface PortRuleOps {
  /** iptables-restore --noflush of `input` (one transaction per table). */
  restore(input: string): Promise<void>;
  /** iptables-save of every table. */
  save(): Promise<string>;
  /** net.ipv4.conf.<bridge>.route_localnet; a bridge that is gone is no error. */
  routeLocalnet(bridge: string, on: boolean): Promise<void>;
}

export class HostPortRuleOps implements PortRuleOps {
  async restore(input: string): Promise<void> {
    const r = await runTool('iptables-restore', ['-w', '--noflush'], { input });
    if (r.code !== 0) throw systemError(`iptables-restore: ${r.stderr || `exit status ${r.code}`}`);
  }

  async save(): Promise<string> {
    const r = await runTool('iptables-save', [], { stdout: true });
    if (r.code !== 0) throw systemError(`iptables-save: ${r.stderr || `exit status ${r.code}`}`);
    return r.stdout;
  }

  async routeLocalnet(bridge: string, on: boolean): Promise<void> {
    try {
      await writeFile(`/proc/sys/net/ipv4/conf/${bridge}/route_localnet`, on ? '1\n' : '0\n');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw err;
    }
  }
}
