import type { NetnsOps } from '../../../../../src/engine/network/adapters/netns.ops.js';
import type { PortHolder, PortSocketOps } from '../../../../../src/engine/network/adapters/port-sockets.js';
import type { NftOps } from '../../../../../src/engine/network/lb/nft.ops.js';
import type { NsLinkOps } from '../../../../../src/engine/network/lb/ns-link.ops.js';
import type { PortProto } from '../../../../../src/engine/network/ports/port-spec.js';

/** nft as a record of scripts per namespace ('host' for the engine's own); `failNext` fails one run. */
export class FakeNft implements NftOps {
  runs: Array<{ netns: string; script: string }> = [];
  failNext = false;
  async run(netns: string | undefined, script: string): Promise<void> {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('nft: failed');
    }
    this.runs.push({ netns: netns ?? 'host', script });
  }
  async tables(): Promise<string[]> {
    return [];
  }
}

/** Links and namespaces in memory: `ns/link` names, the sysctls written, the calls made. */
export class FakeLinks implements NsLinkOps {
  links = new Set<string>();
  namespaces = new Set<string>();
  sysctls = new Map<string, string>();
  calls: string[] = [];
  async ipBatch(netns: string | undefined, lines: string[]): Promise<void> {
    const ns = netns ?? 'host';
    this.calls.push(`ip ${ns}: ${lines.join('; ')}`);
    for (const l of lines) {
      const add = /^link add (\S+) type veth peer name (\S+) netns (\S+)$/.exec(l);
      if (add) {
        this.links.add(`${ns}/${add[1]}`);
        this.links.add(`${add[3]}/${add[2]}`);
      }
    }
  }
  async linkExists(netns: string | undefined, name: string): Promise<boolean> {
    return this.links.has(`${netns ?? 'host'}/${name}`);
  }
  async deleteLink(netns: string | undefined, name: string): Promise<void> {
    this.calls.push(`del ${netns ?? 'host'}/${name}`);
    this.links.delete(`${netns ?? 'host'}/${name}`);
  }
  async sysctl(netns: string | undefined, key: string, value: string): Promise<void> {
    this.sysctls.set(`${netns ?? 'host'}:${key}`, value);
  }
  async isNamespace(path: string): Promise<boolean> {
    return this.namespaces.has(path);
  }
  /** The host's FORWARD chain, `-A ...` lines. */
  forward: string[] = ['-A FORWARD -j OTHER'];
  async forwardRules(): Promise<string> {
    return ['-P FORWARD DROP', ...this.forward, ''].join('\n');
  }
  async restore(netns: string | undefined, input: string): Promise<void> {
    this.calls.push(`restore ${netns ?? 'host'}`);
    for (const l of input.split('\n')) {
      if (l.startsWith('-D ')) this.forward = this.forward.filter((r) => r !== `-A ${l.slice(3)}`);
      const insert = /^-I FORWARD (\d+) (.*)$/.exec(l);
      if (insert) this.forward.splice(Number(insert[1]) - 1, 0, `-A FORWARD ${insert[2]}`);
    }
  }
}

/** Namespaces made and removed, shared with FakeLinks (a removed namespace takes its links along). */
export class FakeNetns implements NetnsOps {
  calls: string[] = [];
  constructor(private readonly links: FakeLinks) {}
  async create(path: string): Promise<void> {
    this.calls.push(`create ${path}`);
    this.links.namespaces.add(path);
  }
  async remove(path: string): Promise<void> {
    this.calls.push(`remove ${path}`);
    this.links.namespaces.delete(path);
    for (const l of [...this.links.links]) if (l.startsWith(`${path}/`)) this.links.links.delete(l);
  }
  async list(): Promise<string[]> {
    return [];
  }
  async inUse(): Promise<boolean> {
    return false;
  }
}

/** Port sockets in memory: the ports held; `taken` ports fail as another process's. */
export class FakeSockets implements PortSocketOps {
  held = new Set<string>();
  taken = new Set<string>();
  async bind(proto: PortProto, _hostIp: string, hostPort: number): Promise<PortHolder> {
    const key = `${hostPort}/${proto}`;
    if (this.taken.has(key)) throw Object.assign(new Error('address already in use'), { code: 'EADDRINUSE' });
    this.held.add(key);
    return { close: async () => void this.held.delete(key) };
  }
}
