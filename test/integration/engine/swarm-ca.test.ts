import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RootCa } from '../../../src/engine/swarm/ca/root-ca.js';
import { caDigest } from '../../../src/engine/swarm/ca/tokens.js';
import { TestEngine } from '../../helpers/engine.js';
import { freePort, initLoopbackSwarm, joinLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * Root CA rotation (`docker swarm ca --rotate`): a manager and a worker on this host's loopback.
 * The CLI without -d watches the rotation to its end and prints the new root; every node then
 * holds a certificate of the new root (the worker never dropped out), the join tokens carry the
 * new digest, and the manager's etcd peer certificate comes from the new root too.
 */

interface SwarmView {
  Version: { Index: number };
  Spec: { CAConfig: Record<string, unknown> };
  TLSInfo: { TrustRoot: string; CertIssuerPublicKey: string; CertIssuerSubject: string };
  RootRotationInProgress: boolean;
  JoinTokens: { Worker: string; Manager: string };
}

interface NodeView {
  ID: string;
  Status: { State: string };
  Description: { TLSInfo: { TrustRoot: string; CertIssuerPublicKey: string } };
}

function issuedBy(certPem: string, rootPem: string): boolean {
  return new X509Certificate(certPem).verify(new X509Certificate(rootPem).publicKey);
}

describe('swarm root CA rotation (two engines, docker CLI)', () => {
  let manager: TestEngine;
  let worker: TestEngine;
  let outsider: TestEngine;
  let apiPort: number;

  const swarm = async () => (await manager.request('GET', '/v1.41/swarm')).json<SwarmView>();
  const nodes = async () => (await manager.request('GET', '/v1.41/nodes')).json<NodeView[]>();

  before(async () => {
    apiPort = await freePort();
    const peerPort = await freePort();
    [manager, worker, outsider] = await Promise.all([
      TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] }),
      TestEngine.start({ bridge: 'none' }),
      TestEngine.start({ bridge: 'none' }),
    ]);
    await initLoopbackSwarm(manager, apiPort, ['--dispatcher-heartbeat', '1s']);
    await joinLoopbackSwarm(manager, worker, apiPort);
  });
  after(async () => {
    await worker?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await manager?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await Promise.all([worker?.destroy(), manager?.destroy(), outsider?.destroy()]);
  });

  it('prints the current root; refuses CA flags without --rotate and a certificate without its key', async () => {
    const s = await swarm();
    assert.equal(`${await manager.dockerOk(['swarm', 'ca'])}\n`, s.TLSInfo.TrustRoot);
    const r = await manager.docker(['swarm', 'ca', '--cert-expiry', '2h']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /`--cert-expiry` flag requires the `--rotate` flag to update the CA/);
    const other = RootCa.create();
    const bad = await manager.request('POST', `/v1.41/swarm/update?version=${s.Version.Index}`, {
      body: { ...s.Spec, CAConfig: { ...s.Spec.CAConfig, SigningCACert: other.certPem } },
    });
    assert.equal(bad.status, 400);
    assert.match(
      bad.json<{ message: string }>().message,
      /rpc error: code = InvalidArgument desc = there must be at least one valid, reachable external CA corresponding to the desired CA certificate/,
    );
    const mismatched = await manager.request('POST', `/v1.41/swarm/update?version=${s.Version.Index}`, {
      body: {
        ...s.Spec,
        CAConfig: {
          ...s.Spec.CAConfig,
          SigningCACert: other.certPem,
          SigningCAKey: RootCa.create().material.keyPem,
        },
      },
    });
    assert.equal(mismatched.status, 400);
    assert.match(
      mismatched.json<{ message: string }>().message,
      /rpc error: code = InvalidArgument desc = certificate key mismatch/,
    );
    assert.equal((await swarm()).RootRotationInProgress, false);
  });

  it('docker swarm ca --rotate converges on every node and prints the new root', async () => {
    const before = await swarm();
    const oldRoot = before.TLSInfo.TrustRoot;
    const oldToken = before.JoinTokens.Worker;
    const workerId = await worker.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    // while the CLI watches, every look at the nodes finds both ready (no node drops out)
    let rotating = true;
    const seen: string[] = [];
    const watcher = (async () => {
      while (rotating) {
        const list = await nodes();
        seen.push(list.map((n) => n.Status.State).join(','));
        await new Promise((res) => setTimeout(res, 200));
      }
    })();
    const r = await manager.docker(['swarm', 'ca', '--rotate', '--cert-expiry', '48h'], {
      timeoutMs: 90_000,
    });
    rotating = false;
    await watcher;
    assert.equal(r.code, 0, r.stderr);
    assert.ok(seen.length > 0);
    assert.deepEqual(
      seen.filter((s) => s !== 'ready,ready'),
      [],
    );
    const after = await swarm();
    assert.equal(after.RootRotationInProgress, false);
    assert.notEqual(after.TLSInfo.TrustRoot, oldRoot);
    assert.ok(r.stdout.trimEnd().endsWith(after.TLSInfo.TrustRoot.trimEnd()), r.stdout);
    assert.equal(after.Spec.CAConfig.NodeCertExpiry, 48 * 3600e9);
    assert.equal(after.Spec.CAConfig.ForceRotate, 1);
    assert.equal(after.Spec.CAConfig.SigningCACert, undefined);
    for (const n of await nodes()) {
      assert.equal(n.Status.State, 'ready', n.ID);
      assert.equal(n.Description.TLSInfo.CertIssuerPublicKey, after.TLSInfo.CertIssuerPublicKey, n.ID);
      assert.equal(n.Description.TLSInfo.TrustRoot, after.TLSInfo.TrustRoot, n.ID);
    }
    // the files on each node: certificate (and the manager's etcd peer certificate) from the new root
    const newRoot = after.TLSInfo.TrustRoot;
    const certs = (e: TestEngine, f: string) => readFile(join(e.dataRoot, 'swarm', 'certs', f), 'utf8');
    assert.equal(await certs(worker, 'swarm-root-ca.crt'), newRoot);
    assert.ok(issuedBy(await certs(worker, 'swarm-node.crt'), newRoot));
    assert.ok(issuedBy(await certs(manager, 'swarm-node.crt'), newRoot));
    assert.ok(issuedBy(await certs(manager, 'etcd-peer.crt'), newRoot));
    // the worker is still in the swarm and heard from
    assert.equal(await worker.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'active');
    assert.equal(
      await manager.dockerOk(['node', 'inspect', workerId, '--format', '{{.Status.State}}']),
      'ready',
    );
    // the join tokens carry the new root's digest: the old one fails on the fingerprint
    assert.notEqual(after.JoinTokens.Worker, oldToken);
    assert.equal(after.JoinTokens.Worker.split('-')[2], caDigest(newRoot));
    const old = await outsider.docker(['swarm', 'join', '--token', oldToken, `127.0.0.1:${apiPort}`]);
    assert.notEqual(old.code, 0);
    assert.match(
      old.stderr,
      new RegExp(`remote CA does not match fingerprint. Expected: ${oldToken.split('-')[2]}`),
    );
    // etcd and the cluster API go on: a write and a read through the manager
    await manager.dockerOk(['node', 'update', '--label-add', 'rotated=yes', workerId]);
    assert.equal(
      await manager.dockerOk(['node', 'inspect', workerId, '--format', '{{index .Spec.Labels "rotated"}}']),
      'yes',
    );
  });

  it('rotates to a root given with --ca-cert and --ca-key (-d), and a node joins with the new token', async () => {
    const given = RootCa.create();
    const dir = manager.dir;
    await writeFile(join(dir, 'given-ca.crt'), given.certPem);
    await writeFile(join(dir, 'given-ca.key'), given.material.keyPem, { mode: 0o600 });
    await manager.dockerOk([
      'swarm',
      'ca',
      '--rotate',
      '-d',
      '--ca-cert',
      join(dir, 'given-ca.crt'),
      '--ca-key',
      join(dir, 'given-ca.key'),
    ]);
    let s = await swarm();
    for (let i = 0; i < 150 && (s.RootRotationInProgress || s.TLSInfo.TrustRoot !== given.certPem); i++) {
      await new Promise((r) => setTimeout(r, 200));
      s = await swarm();
    }
    assert.equal(s.RootRotationInProgress, false);
    assert.equal(s.TLSInfo.TrustRoot, given.certPem);
    assert.equal(s.Spec.CAConfig.SigningCACert, undefined);
    assert.equal(s.Spec.CAConfig.SigningCAKey, undefined);
    assert.equal(`${await manager.dockerOk(['swarm', 'ca'])}\n`, given.certPem);
    // an update that sends the spec back as read starts nothing
    const again = await manager.request('POST', `/v1.41/swarm/update?version=${s.Version.Index}`, {
      body: s.Spec,
    });
    assert.equal(again.status, 200);
    assert.equal((await swarm()).RootRotationInProgress, false);
    const token = (await swarm()).JoinTokens.Worker;
    assert.equal(
      await outsider.dockerOk([
        'swarm',
        'join',
        '--token',
        token,
        '--advertise-addr',
        '127.0.0.1',
        `127.0.0.1:${apiPort}`,
      ]),
      'This node joined a swarm as a worker.',
    );
    const id = await outsider.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    const inspected = (await manager.request('GET', `/v1.41/nodes/${id}`)).json<NodeView>();
    assert.equal(inspected.Description.TLSInfo.CertIssuerPublicKey, s.TLSInfo.CertIssuerPublicKey);
    await outsider.dockerOk(['swarm', 'leave']);
  });
});
