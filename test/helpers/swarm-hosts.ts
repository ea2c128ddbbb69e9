import { join } from 'node:path';
import { EtcdStore } from '../../src/engine/swarm/store/etcd-store.js';
import { BUSYBOX_CHANGES, busyboxTarball } from './busybox.js';
import { NsEngine, TestNetwork } from './swarm-netns.js';

export type HostRole = 'manager' | 'worker';

export interface SwarmHostsOptions {
  /** Import the busybox image on every host (default), on none, or on the joining hosts only. */
  busybox?: 'all' | 'none' | 'joiners';
  /** `docker swarm init` flags beyond `--dispatcher-heartbeat 1s`. */
  initArgs?: string[];
  /** Open an EtcdStore on the first host's member (its etcd client socket). */
  store?: boolean;
}

/**
 * A swarm across hosts in network namespaces (TestNetwork + NsEngine), as the multi-host tests
 * need it: host 1 inits (`--dispatcher-heartbeat 1s`) and is always a manager; host i joins with
 * the token of `roles[i - 1]`, one after the other (a manager join waits for its member to vote).
 * `destroy()` ends every engine (the joiners first) and removes the namespaces.
 */
export class SwarmHosts {
  /** Node IDs by hostname (`host1`, `host2`…). */
  readonly nodeIds = new Map<string, string>();
  store?: EtcdStore;

  private constructor(
    readonly net: TestNetwork,
    readonly engines: NsEngine[],
  ) {}

  /** The first host's engine: the swarm's first manager. */
  get first(): NsEngine {
    const e = this.engines[0];
    if (!e) throw new Error('no hosts');
    return e;
  }

  static async start(roles: HostRole[], opts: SwarmHostsOptions = {}): Promise<SwarmHosts> {
    if (roles[0] !== 'manager') throw new Error('host 1 inits the swarm: its role is manager');
    const net = await TestNetwork.create(roles.length);
    const hosts = new SwarmHosts(net, []);
    try {
      hosts.engines.push(
        ...(await Promise.all(roles.map((_, i) => NsEngine.start(net.hosts[i] ?? '', `host${i + 1}`)))),
      );
      const busybox = opts.busybox ?? 'all';
      if (busybox !== 'none') {
        const tar = await busyboxTarball();
        const targets = busybox === 'all' ? hosts.engines : hosts.engines.slice(1);
        await Promise.all(
          targets.map((e) => e.dockerOk(['import', ...BUSYBOX_CHANGES, tar, 'busybox:latest'])),
        );
      }
      const first = hosts.first;
      await first.dockerOk(['swarm', 'init', '--dispatcher-heartbeat', '1s', ...(opts.initArgs ?? [])]);
      const tokens = new Map<HostRole, string>();
      for (const [i, role] of roles.entries()) {
        if (i === 0) continue;
        let token = tokens.get(role);
        if (!token) {
          token = await first.dockerOk(['swarm', 'join-token', '-q', role]);
          tokens.set(role, token);
        }
        await hosts.engines[i]?.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]);
      }
      for (const line of (await first.dockerOk(['node', 'ls', '--format', '{{.ID}} {{.Hostname}}'])).split(
        '\n',
      )) {
        const [id, host] = line.trim().split(/\s+/);
        if (id && host) hosts.nodeIds.set(host, id);
      }
      if (opts.store)
        hosts.store = new EtcdStore({ socketPath: join(first.dir, 'exec', 'swarm', 'etcd.sock:0') });
    } catch (err) {
      await hosts.destroy();
      throw err;
    }
    return hosts;
  }

  /** The node ID of host `i` (1-based). */
  nodeId(i: number): string {
    const id = this.nodeIds.get(`host${i}`);
    if (!id) throw new Error(`no node for host${i}`);
    return id;
  }

  /** Ends every engine (the joiners first) and always removes the namespaces, even if an engine's removal failed. */
  async destroy(): Promise<void> {
    this.store?.close();
    const joiners = await Promise.allSettled(this.engines.slice(1).map((e) => e.destroy()));
    const first = await Promise.allSettled([this.engines[0]?.destroy()]);
    await this.net.destroy();
    const failed = [...joiners, ...first].find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
