import { Periodic } from '../../../common/periodic.js';
import type { ManagerAddress } from '../cluster-api/protocol.js';
import { keys } from '../keys.js';
import type { StoredManager, StoredNode } from '../records.js';
import type { ClusterStore } from '../store/cluster-store.js';
import type { NodeRole } from '../swarm.types.js';

/**
 * A manager's look at its own record every heartbeat period: a demotion shows as its Role
 * turning worker. Once it is demoted its member is removed and its store answers nothing: then
 * it says "maybe" (`suspect`), and the membership room asks the other managers, whose addresses
 * this keeps as last read.
 */
export class RoleWatch {
  private others: ManagerAddress[] = [];
  private readonly periodic = new Periodic(() => this.look());

  constructor(
    private readonly store: ClusterStore,
    private readonly nodeId: string,
    private readonly onWorker: () => void,
  ) {}

  /** The other managers' cluster API addresses, as last read. */
  get managers(): ManagerAddress[] {
    return this.others;
  }

  start(periodMs: number): void {
    this.periodic.start(periodMs);
  }

  stop(): void {
    this.periodic.stop();
  }

  check(): Promise<void> {
    return this.periodic.run();
  }

  private async look(): Promise<void> {
    let role: NodeRole | undefined;
    try {
      const [node, managers] = await Promise.all([
        this.store.get(keys.node(this.nodeId)),
        this.store.range(keys.managers),
      ]);
      this.others = managers.kvs
        .filter((kv) => kv.key !== keys.manager(this.nodeId))
        .map((kv) => ({
          NodeID: kv.key.slice(keys.managers.length),
          Addr: (JSON.parse(kv.value) as StoredManager).addr,
        }));
      role = node ? (JSON.parse(node.value) as StoredNode).Spec.Role : undefined;
    } catch {
      // the store does not answer: a removed member, or a lost quorum; the others will say which
      if (this.others.length > 0) this.onWorker();
      return;
    }
    if (role === 'worker') this.onWorker();
  }
}
