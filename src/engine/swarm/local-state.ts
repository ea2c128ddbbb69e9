import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode } from '../../common/errors.js';
import { writeFileAtomic, writeJsonAtomic } from '../../common/fs/atomic.js';
import type { ManagerAddress } from './cluster-api/protocol.js';
import type { RaftSettings } from './etcd/etcd-args.js';
import type { NodeAvailability, NodeRole } from './swarm.types.js';

/**
 * What a node keeps of its swarm on its own disk, under `<data-root>/swarm/`: `state.json` (who
 * it is in which swarm, its addresses), `certs/` (0700: the root CA certificate, its node
 * certificate and key; on managers also the etcd peer certificate and the cluster's DEK), and on
 * managers `etcd/` (the member's data).
 */

export interface LocalState {
  NodeID: string;
  ClusterID: string;
  Role: NodeRole;
  Availability: NodeAvailability;
  ListenAddr: string;
  /** The advertise address's host (NodeAddr). */
  AdvertiseHost: string;
  /** The port other nodes reach this one's cluster API on (the ListenAddr port unless given). */
  AdvertisePort: number;
  DataPathAddr: string;
  /** This manager's etcd peer port. */
  PeerPort?: number;
  /** The cluster's Raft settings as last seen: the member's flags when it next starts. */
  Raft?: RaftSettings;
  /** A worker's managers (their cluster API addresses), as the last one told. */
  Managers?: ManagerAddress[];
  /** Autolock: the DEK and the node key on disk are sealed under the unlock key; a start is `locked`. */
  Autolock?: boolean;
  /** A worker's heartbeat period, as the managers said. */
  HeartbeatPeriodMs?: number;
}

export interface CertFiles {
  ca: string;
  nodeCert: string;
  nodeKey: string;
  peerCert: string;
  peerKey: string;
  dek: string;
}

export class LocalSwarmFiles {
  readonly dir: string;
  readonly etcdDir: string;
  readonly certsDir: string;
  readonly certs: CertFiles;

  constructor(dataRoot: string) {
    this.dir = join(dataRoot, 'swarm');
    this.etcdDir = join(this.dir, 'etcd');
    this.certsDir = join(this.dir, 'certs');
    this.certs = {
      ca: join(this.certsDir, 'swarm-root-ca.crt'),
      nodeCert: join(this.certsDir, 'swarm-node.crt'),
      nodeKey: join(this.certsDir, 'swarm-node.key'),
      peerCert: join(this.certsDir, 'etcd-peer.crt'),
      peerKey: join(this.certsDir, 'etcd-peer.key'),
      dek: join(this.certsDir, 'dek'),
    };
  }

  async load(): Promise<LocalState | undefined> {
    try {
      return JSON.parse(await readFile(join(this.dir, 'state.json'), 'utf8')) as LocalState;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  async save(state: LocalState): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await writeJsonAtomic(join(this.dir, 'state.json'), state);
  }

  async writeSecret(path: string, data: string | Buffer): Promise<void> {
    await mkdir(this.certsDir, { recursive: true, mode: 0o700 });
    await chmod(this.certsDir, 0o700);
    // a reader (a TLS reload, a restart after a crash) sees the old file or the new, never a torn one
    await writeFileAtomic(path, data, 0o600);
  }

  async readDek(): Promise<Buffer> {
    return readFile(this.certs.dek);
  }

  /** Everything of the swarm on this disk: state, certificates, the etcd member's data. */
  async wipe(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
