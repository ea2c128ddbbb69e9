import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { systemError } from '../../../common/errors.js';
import { inNamespace } from './nft.ops.js';

/**
 * Links, sysctls and filter FORWARD rules in a network namespace given by its path (the engine's
 * own when undefined), for the ingress sandbox's link to the host: `ip -batch -`, `tee
 * /proc/sys/...`, `iptables -S FORWARD` and `iptables-restore --noflush`, run under `nsenter
 * --net=<path>` (/proc/sys/net is the namespace of the process that opens it). Unit tests
 * substitute a fake.
 */
export interface NsLinkOps {
  /** Run `ip` commands (one a line, `ip -batch` syntax) in the namespace; all or an error. */
  ipBatch(netns: string | undefined, lines: string[]): Promise<void>;
  /** Whether the namespace has a link of that name. */
  linkExists(netns: string | undefined, name: string): Promise<boolean>;
  /** Delete a link; a missing one is no error. */
  deleteLink(netns: string | undefined, name: string): Promise<void>;
  /** Write `/proc/sys/<key>` (`net/ipv4/ip_forward`) in the namespace. */
  sysctl(netns: string | undefined, key: string, value: string): Promise<void>;
  /** Whether `path` is a bound network namespace (an nsfs mount, not a plain file). */
  isNamespace(path: string): Promise<boolean>;
  /** `iptables -S FORWARD` of the filter table. */
  forwardRules(netns: string | undefined): Promise<string>;
  /** `iptables-restore --noflush` of `input`. */
  restore(netns: string | undefined, input: string): Promise<void>;
}

export class HostNsLinkOps implements NsLinkOps {
  async ipBatch(netns: string | undefined, lines: string[]): Promise<void> {
    const r = await inNamespace(netns, 'ip', ['-batch', '-'], `${lines.join('\n')}\n`);
    if (r.code !== 0)
      throw systemError(`ip${netns ? ` in ${netns}` : ''}: ${r.stderr || `exit status ${r.code}`}`);
  }

  async linkExists(netns: string | undefined, name: string): Promise<boolean> {
    const r = await inNamespace(netns, 'ip', ['-j', 'link', 'show', 'dev', name]);
    if (r.code === 0) return true;
    if (/does not exist|Cannot find device/i.test(r.stderr)) return false;
    throw systemError(`ip link show ${name}: ${r.stderr || `exit status ${r.code}`}`);
  }

  async deleteLink(netns: string | undefined, name: string): Promise<void> {
    const r = await inNamespace(netns, 'ip', ['link', 'del', name]);
    if (r.code !== 0 && !/does not exist|Cannot find device/i.test(r.stderr))
      throw systemError(`ip link del ${name}: ${r.stderr || `exit status ${r.code}`}`);
  }

  async sysctl(netns: string | undefined, key: string, value: string): Promise<void> {
    const r = await inNamespace(netns, 'tee', [`/proc/sys/${key}`], `${value}\n`);
    if (r.code !== 0)
      throw systemError(`cannot set ${key.replaceAll('/', '.')}: ${r.stderr || `exit status ${r.code}`}`);
  }

  async isNamespace(path: string): Promise<boolean> {
    const [file, dir] = await Promise.all([
      stat(path).catch(() => undefined),
      stat(dirname(path)).catch(() => undefined),
    ]);
    return !!file && !!dir && file.dev !== dir.dev;
  }

  async forwardRules(netns: string | undefined): Promise<string> {
    const r = await inNamespace(netns, 'iptables', ['-w', '-S', 'FORWARD']);
    if (r.code !== 0) throw systemError(`iptables -S FORWARD: ${r.stderr || `exit status ${r.code}`}`);
    return r.stdout;
  }

  async restore(netns: string | undefined, input: string): Promise<void> {
    const r = await inNamespace(netns, 'iptables-restore', ['-w', '--noflush'], input);
    if (r.code !== 0) throw systemError(`iptables-restore: ${r.stderr || `exit status ${r.code}`}`);
  }
}
