import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '../../../../src/common/log.js';
import type { EtcdProcessHost } from '../../../../src/engine/swarm/etcd/etcd-process.js';
import { EtcdSupervisor } from '../../../../src/engine/swarm/etcd/etcd-supervisor.js';
import { memberSpec } from './etcd-spec.fixture.js';

/** etcd processes in memory: which run, and a way to end one as etcd ends (exit status). */
class FakeEtcds {
  private next = 1000;
  readonly live = new Map<number, { args: string[]; onExit: (code: number | null) => void }>();
  readonly started: number[] = [];
  readonly host: EtcdProcessHost = {
    start: (_binary, args, _cwd, _log, onExit) => {
      const pid = ++this.next;
      this.live.set(pid, { args, onExit });
      this.started.push(pid);
      return pid;
    },
    commandLine: async (pid) => this.live.get(pid)?.args,
    signal: (pid, sig) => {
      const p = this.live.get(pid);
      if (!p) return false;
      if (sig !== 0) this.exit(pid, null);
      return true;
    },
  };

  exit(pid: number, code: number | null): void {
    const p = this.live.get(pid);
    if (!p) return;
    this.live.delete(pid);
    p.onExit(code);
  }
}

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const spec = (dataDir: string) => memberSpec({ dataDir });

describe('EtcdSupervisor', () => {
  it('restarts a member that died, and never a member stopped meanwhile beside the next one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-etcd-sup-'));
    dirs.push(dir);
    const etcds = new FakeEtcds();
    const sup = new EtcdSupervisor({
      binary: 'etcd',
      runDir: join(dir, 'run'),
      host: etcds.host,
      log: new Logger('error'),
      ready: async () => {},
      restartDelayMs: 150,
    });
    await sup.start(spec(join(dir, 'data')));
    const first = sup.memberPid ?? 0;
    // a member that dies is restarted after the delay
    etcds.exit(first, 1);
    await sleep(300);
    assert.equal(etcds.started.length, 2, 'restarted once');
    assert.equal(etcds.live.size, 1);

    // removed from the cluster (a demotion): etcd exits 0, a restart is scheduled; the node is
    // then demoted (stop) and promoted again (start) before that restart's time has come
    etcds.exit(sup.memberPid ?? 0, 0);
    await sup.stop();
    await sup.start(spec(join(dir, 'data')));
    const current = sup.memberPid;
    await sleep(450);
    assert.equal(etcds.live.size, 1, 'one etcd on the data dir, not two');
    assert.equal(sup.memberPid, current, 'the member of the promotion is the one supervised');
    await sup.stop();
    assert.equal(etcds.live.size, 0);
  });
});
