import { stat } from 'node:fs/promises';
import { systemError } from '../../../common/errors.js';
import { runTool, type ToolResult } from '../../../common/host/run-tool.js';

/**
 * nftables in a network namespace: `nft -f -` of a whole script (one transaction: all of it or
 * nothing), run in the namespace bound at a path (`nsenter --net=<path>`, which execs nft: one
 * process) or in the engine's own (`undefined`). Unit tests substitute a fake.
 */
export interface NftOps {
  /** Run `script` (nft -f syntax) in the namespace; rejects with nft's message. */
  run(netns: string | undefined, script: string): Promise<void>;
  /** The namespace's tables as `family name` (`ip berth-vip`). */
  tables(netns: string | undefined): Promise<string[]>;
}

/** `cmd args` run in the namespace at `netns` (the engine's own when undefined). */
export function inNamespace(
  netns: string | undefined,
  cmd: string,
  args: string[],
  input?: string,
): Promise<ToolResult> {
  if (netns === undefined) return runTool(cmd, args, { input, stdout: true });
  return runTool('nsenter', [`--net=${netns}`, cmd, ...args], { input, stdout: true });
}

/**
 * An identity of the namespace bound at `path` (its nsfs device and inode), undefined when there
 * is no such file: a path reused by another namespace has another identity. A stat, no process.
 */
export async function namespaceId(path: string): Promise<string | undefined> {
  const st = await stat(path).catch(() => undefined);
  return st ? `${st.dev}:${st.ino}` : undefined;
}

export class HostNftOps implements NftOps {
  async run(netns: string | undefined, script: string): Promise<void> {
    const r = await inNamespace(netns, 'nft', ['-f', '-'], script);
    if (r.code !== 0) {
      const where = netns ? ` in ${netns}` : '';
      throw systemError(`nft${where}: ${r.stderr || `exit status ${r.code}`}`);
    }
  }

  async tables(netns: string | undefined): Promise<string[]> {
    const r = await inNamespace(netns, 'nft', ['list', 'tables']);
    if (r.code !== 0) throw systemError(`nft list tables: ${r.stderr || `exit status ${r.code}`}`);
    return r.stdout
      .split('\n')
      .filter((l) => l.startsWith('table '))
      .map((l) => l.slice('table '.length).trim());
  }
}
