import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Logger } from '../../src/common/log.js';
import { RootCa } from '../../src/engine/swarm/ca/root-ca.js';
import { ETCD_PEER_CN, type EtcdMemberSpec } from '../../src/engine/swarm/etcd/etcd-args.js';
import { hostEtcdProcesses } from '../../src/engine/swarm/etcd/etcd-process.js';
import { waitForEtcd } from '../../src/engine/swarm/etcd/etcd-ready.js';
import { EtcdSupervisor } from '../../src/engine/swarm/etcd/etcd-supervisor.js';
import type { TestEngine } from './engine.js';

import { freePort } from './free-port.js';

export { freePort };

/** A free tcp port on 127.0.0.1 (closed again: a race is possible but rare). */

export const DEFAULT_RAFT = {
  SnapshotInterval: 10000,
  KeepOldSnapshots: 0,
  LogEntriesForSlowFollowers: 500,
  HeartbeatTick: 1,
  ElectionTick: 10,
};

/** A supervisor as an engine makes one, for the member under `dir`. */
export function testSupervisor(dir: string): EtcdSupervisor {
  return new EtcdSupervisor({
    binary: process.env.BERTH_TEST_ETCD ?? '/usr/bin/etcd',
    runDir: join(dir, 'run'),
    host: hostEtcdProcesses,
    log: new Logger('error'),
    ready: waitForEtcd,
    pollMs: 100,
  });
}

/** A one-member spec under `dir` with peer TLS from a fresh CA, its peer port on loopback. */
export async function testMemberSpec(dir: string): Promise<EtcdMemberSpec> {
  const ca = RootCa.create();
  const peer = ca.issueEtcdPeer(ETCD_PEER_CN, ['127.0.0.1'], 24 * 3600 * 1000);
  const tls = {
    certFile: join(dir, 'peer.crt'),
    keyFile: join(dir, 'peer.key'),
    caFile: join(dir, 'ca.crt'),
  };
  await writeFile(tls.certFile, peer.certPem);
  await writeFile(tls.keyFile, peer.keyPem, { mode: 0o600 });
  await writeFile(tls.caFile, ca.certPem);
  const peerUrl = `https://127.0.0.1:${await freePort()}`;
  return {
    name: 'test',
    dataDir: join(dir, 'data'),
    peerUrl,
    initialCluster: [{ name: 'test', peerUrl }],
    clusterState: 'new',
    clusterToken: 'berth-test',
    peerTls: tls,
    raft: DEFAULT_RAFT,
  };
}

/**
 * One real etcd member, started by a supervisor in a child process (as an engine starts it):
 * `killSupervisor()` ends that process with SIGKILL, leaving the member running for a new
 * supervisor to adopt. `stop()` ends whatever runs and removes the directory.
 */
export class TestEtcd {
  supervisor?: EtcdSupervisor;

  private constructor(
    readonly dir: string,
    readonly spec: EtcdMemberSpec,
    private child: ChildProcess | undefined,
    readonly memberPid: number,
  ) {}

  get socketPath(): string {
    return join(this.dir, 'run', 'etcd.sock:0');
  }

  static async start(): Promise<TestEtcd> {
    const dir = await mkdtemp(join(tmpdir(), 'berth-etcd-'));
    const spec = await testMemberSpec(dir);
    await writeFile(join(dir, 'spec.json'), JSON.stringify(spec));
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'swarm-etcd-run.ts'), dir],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const line = await new Promise<string>((ok, fail) => {
      let out = '';
      child.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) ok(out.trim());
      });
      child.on('exit', (code) => fail(new Error(`the etcd supervisor exited (${code}): ${out}`)));
    });
    const pid = Number(/^ready (\d+)$/.exec(line)?.[1]);
    return new TestEtcd(dir, spec, child, pid);
  }

  /** SIGKILL to the supervising process, as to an engine: the member keeps running. */
  async killSupervisor(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  async stop(): Promise<void> {
    await this.killSupervisor();
    if (!this.supervisor) {
      // adopt whatever member runs so that it is ended by pid
      this.supervisor = testSupervisor(this.dir);
      await this.supervisor.start(this.spec).catch(() => {});
    }
    await this.supervisor.stop();
    const pid = Number((await readFile(join(this.dir, 'run', 'etcd.pid'), 'utf8').catch(() => '')).trim());
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * `docker swarm init` on loopback, as most single-engine swarm tests begin: advertise 127.0.0.1,
 * the cluster API on `listenPort` (a free one when not given). Returns the node's ID.
 */
export async function initLoopbackSwarm(
  engine: TestEngine,
  listenPort?: number,
  extraArgs: string[] = [],
): Promise<string> {
  const port = listenPort ?? (await freePort());
  await engine.dockerOk([
    'swarm',
    'init',
    '--advertise-addr',
    '127.0.0.1',
    '--listen-addr',
    `127.0.0.1:${port}`,
    ...extraArgs,
  ]);
  return (await engine.request('GET', '/info')).json<{ Swarm: { NodeID: string } }>().Swarm.NodeID;
}

/** `engine` joins the loopback swarm whose manager listens on `127.0.0.1:<apiPort>`, as a worker. */
export async function joinLoopbackSwarm(
  manager: TestEngine,
  engine: TestEngine,
  apiPort: number,
): Promise<void> {
  const token = await manager.dockerOk(['swarm', 'join-token', '-q', 'worker']);
  await engine.dockerOk([
    'swarm',
    'join',
    '--token',
    token,
    '--advertise-addr',
    '127.0.0.1',
    `127.0.0.1:${apiPort}`,
  ]);
}
