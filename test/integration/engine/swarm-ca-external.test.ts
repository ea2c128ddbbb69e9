import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { RootCa } from '../../../src/engine/swarm/ca/root-ca.js';
import { TestEngine } from '../../helpers/engine.js';
import { freePort, initLoopbackSwarm, joinLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * An external CA (swarmkit's ExternalCA, cfssl's API): a real `cfssl serve` on loopback with a CA
 * made here. `docker swarm ca --rotate --ca-cert <its cert> --external-ca protocol=cfssl,url=…`
 * moves the swarm onto that root, whose key the swarm never holds: every certificate from then
 * on (renewals, a join) is signed by cfssl. With cfssl gone, a join fails with a clear 503.
 */

interface SwarmView {
  Version: { Index: number };
  Spec: {
    CAConfig: { ExternalCAs?: { Protocol: string; URL: string; CACert: string }[] } & Record<string, unknown>;
  };
  TLSInfo: { TrustRoot: string };
  RootRotationInProgress: boolean;
  JoinTokens: { Worker: string };
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('swarm external CA (cfssl serve on loopback)', () => {
  let manager: TestEngine;
  let worker: TestEngine;
  let outsider: TestEngine;
  let apiPort: number;
  let cfssl: ChildProcess | undefined;
  let dir: string;
  let url: string;
  const ca = RootCa.create();

  const swarm = async () => (await manager.request('GET', '/v1.41/swarm')).json<SwarmView>();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-cfssl-'));
    await writeFile(join(dir, 'ca.pem'), ca.certPem);
    await writeFile(join(dir, 'ca-key.pem'), ca.material.keyPem, { mode: 0o600 });
    const port = await freePort();
    url = `http://127.0.0.1:${port}/api/v1/cfssl/sign`;
    cfssl = spawn(
      'cfssl',
      [
        'serve',
        '-address',
        '127.0.0.1',
        '-port',
        String(port),
        '-ca',
        join(dir, 'ca.pem'),
        '-ca-key',
        join(dir, 'ca-key.pem'),
      ],
      { stdio: 'ignore' },
    );
    apiPort = await freePort();
    const peerPort = await freePort();
    [manager, worker, outsider] = await Promise.all([
      TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] }),
      TestEngine.start({ bridge: 'none' }),
      TestEngine.start({ bridge: 'none' }),
    ]);
    for (let i = 0; i < 100 && !(await portOpen(port)); i++) await sleep(100);
    await initLoopbackSwarm(manager, apiPort, ['--dispatcher-heartbeat', '1s']);
    await joinLoopbackSwarm(manager, worker, apiPort);
  });
  after(async () => {
    if (cfssl && cfssl.exitCode === null) cfssl.kill('SIGKILL');
    await worker?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await outsider?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await manager?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await Promise.all([worker?.destroy(), manager?.destroy(), outsider?.destroy()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses an external CA it cannot use, and a certificate without key or external CA', async () => {
    const base = (await swarm()).Spec;
    const update = async (CAConfig: Record<string, unknown>) =>
      manager.request('POST', `/v1.41/swarm/update?version=${(await swarm()).Version.Index}`, {
        body: { ...base, CAConfig: { ...base.CAConfig, ...CAConfig } },
      });
    const proto = await update({ ExternalCAs: [{ Protocol: 'acme', URL: url }] });
    assert.equal(proto.status, 400);
    assert.equal(proto.json<{ message: string }>().message, 'invalid protocol: "acme"');
    const keyless = await update({ SigningCACert: ca.certPem });
    assert.equal(keyless.status, 400);
    assert.equal(
      keyless.json<{ message: string }>().message,
      'rpc error: code = InvalidArgument desc = there must be at least one valid, reachable external CA corresponding to the desired CA certificate',
    );
    const keyOnly = await update({ SigningCAKey: ca.material.keyPem });
    assert.equal(keyOnly.status, 400);
    assert.match(
      keyOnly.json<{ message: string }>().message,
      /if a signing CA key is provided, the signing CA cert must also be provided/,
    );
    // as dockerd, a URL is taken as given: what it is shows when a certificate is signed through it
    assert.equal((await update({ ExternalCAs: [{ Protocol: 'cfssl', URL: 'ftp:/x' }] })).status, 200);
    assert.deepEqual(
      (await swarm()).Spec.CAConfig.ExternalCAs?.map((e) => e.URL),
      ['ftp:/x'],
    );
    assert.equal((await update({})).status, 200);
    assert.equal((await swarm()).Spec.CAConfig.ExternalCAs, undefined);
    assert.equal((await swarm()).RootRotationInProgress, false);
  });

  it('rotates onto the external root: every certificate from then on comes from cfssl', async () => {
    const r = await manager.docker(
      [
        'swarm',
        'ca',
        '--rotate',
        '--ca-cert',
        join(dir, 'ca.pem'),
        '--external-ca',
        `protocol=cfssl,url=${url}`,
      ],
      { timeoutMs: 90_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    const s = await swarm();
    assert.equal(s.RootRotationInProgress, false);
    assert.equal(s.TLSInfo.TrustRoot, ca.certPem);
    assert.deepEqual(
      s.Spec.CAConfig.ExternalCAs?.map((e) => [e.Protocol, e.URL, e.CACert]),
      [['cfssl', url, ca.certPem]],
    );
    const workerId = await worker.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    const clusterId = await manager.dockerOk(['info', '--format', '{{.Swarm.Cluster.ID}}']);
    const cert = new X509Certificate(
      await readFile(join(worker.dataRoot, 'swarm', 'certs', 'swarm-node.crt'), 'utf8'),
    );
    assert.ok(cert.verify(new X509Certificate(ca.certPem).publicKey), 'signed by the external CA');
    assert.equal(cert.subject, `O=${clusterId}\nOU=swarm-worker\nCN=${workerId}`);
    assert.equal(
      await manager.dockerOk(['node', 'inspect', workerId, '--format', '{{.Status.State}}']),
      'ready',
    );
    // a join now: its certificate comes from cfssl too
    const token = s.JoinTokens.Worker;
    await outsider.dockerOk([
      'swarm',
      'join',
      '--token',
      token,
      '--advertise-addr',
      '127.0.0.1',
      `127.0.0.1:${apiPort}`,
    ]);
    const joined = new X509Certificate(
      await readFile(join(outsider.dataRoot, 'swarm', 'certs', 'swarm-node.crt'), 'utf8'),
    );
    assert.ok(joined.verify(new X509Certificate(ca.certPem).publicKey));
    await outsider.dockerOk(['swarm', 'leave']);
    // an update that sends the spec back as read keeps the external CA and starts nothing
    const again = await manager.request(
      'POST',
      `/v1.41/swarm/update?version=${(await swarm()).Version.Index}`,
      {
        body: (await swarm()).Spec,
      },
    );
    assert.equal(again.status, 200);
    assert.equal((await swarm()).RootRotationInProgress, false);
  });

  it('answers a clear 503 when the external CA is gone', async () => {
    const child = cfssl;
    if (child && child.exitCode === null) {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    }
    const token = (await swarm()).JoinTokens.Worker;
    const r = await outsider.docker([
      'swarm',
      'join',
      '--token',
      token,
      '--advertise-addr',
      '127.0.0.1',
      `127.0.0.1:${apiPort}`,
    ]);
    assert.notEqual(r.code, 0);
    assert.match(
      r.stderr,
      /the external CA could not sign the certificate: cannot reach http:\/\/127\.0\.0\.1/,
    );
    assert.equal(await outsider.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'inactive');
    // the manager goes on
    assert.equal(await manager.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'active');
  });
});
