import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hostEtcdProcesses } from '../../../src/engine/swarm/etcd/etcd-process.js';
import { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import { TestEtcd, testMemberSpec, testSupervisor } from '../../helpers/swarm-etcd.js';
import { storeContract } from '../../unit/engine/swarm/store-contract.js';

async function writeAfterKill(socketPath: string, key: string): Promise<string | undefined> {
  const s = new EtcdStore({ socketPath }, { timeoutMs: 1000 });
  try {
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 200));
      try {
        await s.put(key, 'back');
        return (await s.get(key))?.value;
      } catch {}
    }
    return undefined;
  } finally {
    s.close();
  }
}

describe('etcd 3.4 under the engine supervisor, through the v3 JSON gateway on its unix socket', () => {
  let etcd: TestEtcd;
  before(async () => {
    etcd = await TestEtcd.start();
  });
  after(async () => {
    await etcd?.stop();
  });

  storeContract(() => new EtcdStore({ socketPath: etcd.socketPath }), `/berth-test/${process.pid}`);

  it('listens for clients only on its unix socket, in a 0700 directory', async () => {
    assert.equal((await stat(dirname(etcd.socketPath))).mode & 0o777, 0o700);
    const cmd = (await hostEtcdProcesses.commandLine(etcd.memberPid)) ?? [];
    assert.ok(cmd.includes('--listen-client-urls=unix://etcd.sock:0'), cmd.join(' '));
    assert.ok(!cmd.some((a) => a.startsWith('--listen-client-urls=') && a.includes('http')));
    assert.ok(cmd.includes('--peer-client-cert-auth=true'));
    assert.ok(cmd.includes('--peer-cert-allowed-cn=berth-etcd-peer'));
  });

  it('takes a value of 1.3 MiB (a 999 KiB config in base64)', async () => {
    const s = new EtcdStore({ socketPath: etcd.socketPath });
    const big = 'x'.repeat(1_400_000);
    await s.put('/berth-test/big', big);
    assert.equal((await s.get('/berth-test/big'))?.value.length, big.length);
    await s.delete('/berth-test/big');
    s.close();
  });

  it("fails a start at once, with etcd's reason, when the member exits (its peer port taken)", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-etcd-busy-'));
    try {
      const spec = { ...(await testMemberSpec(dir)), peerUrl: etcd.spec.peerUrl };
      spec.initialCluster = [{ name: spec.name, peerUrl: spec.peerUrl }];
      const started = Date.now();
      await assert.rejects(testSupervisor(dir).start(spec), /etcd could not start: .*address already in use/);
      assert.ok(Date.now() - started < 10_000, 'not a wait for the ready timeout');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is adopted through its pid file after its supervisor is killed with SIGKILL', async () => {
    await etcd.killSupervisor();
    const next = testSupervisor(etcd.dir);
    etcd.supervisor = next;
    await next.start(etcd.spec);
    assert.equal(next.memberPid, etcd.memberPid);
    const s = new EtcdStore({ socketPath: next.socketPath });
    await s.put('/berth-test/adopted', 'yes');
    assert.equal((await s.get('/berth-test/adopted'))?.value, 'yes');
    s.close();
  });

  it('restarts the member when it dies, adopted or its own child', async () => {
    const next = etcd.supervisor;
    assert.ok(next);
    process.kill(etcd.memberPid, 'SIGKILL');
    assert.equal(await writeAfterKill(next.socketPath, '/berth-test/after-1'), 'back');
    const second = next.memberPid ?? 0;
    assert.ok(second > 0 && second !== etcd.memberPid);
    process.kill(second, 'SIGKILL');
    assert.equal(await writeAfterKill(next.socketPath, '/berth-test/after-2'), 'back');
    assert.ok(next.memberPid !== undefined && next.memberPid !== second);
  });
});
