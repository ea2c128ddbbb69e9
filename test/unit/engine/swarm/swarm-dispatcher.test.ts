import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import { finishRotationIfDone, requestedRoot } from '../../../../src/engine/swarm/ca/ca-state.js';
import { splitPem } from '../../../../src/engine/swarm/ca/cert-info.js';
import { newKeyPair } from '../../../../src/engine/swarm/ca/certificates.js';
import { createCsr, csrPublicKey } from '../../../../src/engine/swarm/ca/csr.js';
import { RootCa, tlsInfoOf } from '../../../../src/engine/swarm/ca/root-ca.js';
import { caDigest, newJoinToken } from '../../../../src/engine/swarm/ca/tokens.js';
import type { JoinCall } from '../../../../src/engine/swarm/cluster-api/protocol.js';
import { BAD_TOKEN, Dispatcher } from '../../../../src/engine/swarm/dispatcher.js';
import { keys } from '../../../../src/engine/swarm/keys.js';
import { newDek, seal } from '../../../../src/engine/swarm/seal.js';
import { defaultSpec } from '../../../../src/engine/swarm/spec.js';
import { MemoryStore } from '../../../../src/engine/swarm/store/memory-store.js';

async function setup() {
  let now = Date.parse('2026-11-28T00:00:00Z');
  const store = new MemoryStore(() => now);
  const ca = RootCa.create();
  const dek = newDek();
  const tokens = { Worker: newJoinToken(ca.certPem), Manager: newJoinToken(ca.certPem) };
  await store.put(keys.cluster, JSON.stringify({ ID: 'cluster1', Spec: defaultSpec(), JoinTokens: tokens }));
  await store.put(
    keys.manager('m1'),
    JSON.stringify({ memberId: '1', peerUrl: 'https://x:2380', addr: '10.0.0.1:2377' }),
  );
  await store.put(keys.caRoot, JSON.stringify({ cert: ca.certPem, key: seal(dek, ca.material.keyPem) }));
  const d = new Dispatcher(store, dek, new Logger('error'), () => new Date(now));
  const key = newKeyPair();
  const call = (token: string): JoinCall => ({
    Token: token,
    CSR: createCsr(key.privateKey, 'swarm-join'),
    Availability: '',
    AdvertiseHost: '10.0.0.2',
    ListenAddr: '0.0.0.0:2377',
    DataPathAddr: '10.0.0.2',
    Description: {
      Hostname: 'w1',
      Platform: { Architecture: 'x86_64', OS: 'linux' },
      Resources: { NanoCPUs: 1e9, MemoryBytes: 1 },
      Engine: { EngineVersion: '0.1.0', Plugins: [] },
      TLSInfo: { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' },
    },
  });
  return { store, ca, dek, tokens, d, key, call, advance: (ms: number) => (now += ms) };
}

describe('the manager dispatcher (joins and heartbeats)', () => {
  it('admits a worker: a Node in etcd, a certificate for the CSR key, its liveness', async () => {
    const { store, ca, tokens, d, key, call } = await setup();
    const answer = await d.join(call(tokens.Worker));
    assert.equal(answer.Role, 'worker');
    assert.equal(answer.ClusterID, 'cluster1');
    assert.deepEqual(answer.Managers, [{ NodeID: 'm1', Addr: '10.0.0.1:2377' }]);
    assert.equal(answer.HeartbeatPeriodMs, 5000);
    const cert = new X509Certificate(answer.Certificate);
    assert.equal(cert.subject, `O=cluster1\nOU=swarm-worker\nCN=${answer.NodeID}`);
    assert.ok(ca.verifies(answer.Certificate));
    assert.equal(
      cert.publicKey.export({ type: 'spki', format: 'pem' }),
      key.publicKey.export({ type: 'spki', format: 'pem' }),
    );
    const node = JSON.parse((await store.get(keys.node(answer.NodeID)))?.value ?? '{}');
    assert.equal(node.Spec.Role, 'worker');
    assert.equal(node.Spec.Availability, 'active');
    assert.equal(node.Description.Hostname, 'w1');
    assert.ok(await store.get(keys.live(answer.NodeID)));
  });

  it("keeps the joiner's data-path address in its record (never in the API's Node), and refuses one that is no IP", async () => {
    const { store, tokens, d, call } = await setup();
    const answer = await d.join({ ...call(tokens.Worker), DataPathAddr: '172.16.0.2' });
    const node = JSON.parse((await store.get(keys.node(answer.NodeID)))?.value ?? '{}');
    assert.equal(node.Status.Addr, '10.0.0.2', 'Status.Addr stays the advertise address');
    assert.deepEqual(node._, { dataPathAddr: '172.16.0.2' });
    const plain = await d.join({ ...call(tokens.Worker), DataPathAddr: '' });
    const plainNode = JSON.parse((await store.get(keys.node(plain.NodeID)))?.value ?? '{}');
    assert.deepEqual(plainNode._, { dataPathAddr: '10.0.0.2' }, 'none given: the advertise address');
    await assert.rejects(d.join({ ...call(tokens.Worker), DataPathAddr: 'eth0' }), {
      kind: 'InvalidParameter',
      message: 'invalid DataPathAddr "eth0": not an IP address',
    });
  });

  it("refuses tokens that are not the swarm's current ones, and bad CSRs", async () => {
    const { tokens, d, call } = await setup();
    await assert.rejects(d.join(call('SWMTKN-1-x')), { kind: 'InvalidParameter', message: BAD_TOKEN });
    const other = newJoinToken(RootCa.create().certPem);
    await assert.rejects(d.join(call(other)), { message: BAD_TOKEN });
    const rotated = tokens.Worker.replace(/-[0-9a-z]{25}$/, `-${'0'.repeat(25)}`);
    await assert.rejects(d.join(call(rotated)), { message: BAD_TOKEN });
    await assert.rejects(d.join(call(tokens.Manager)), /needs an etcd peer certificate request/);
    await assert.rejects(d.join({ ...call(tokens.Worker), CSR: 'junk' }), /invalid certificate request/);
    await assert.rejects(d.join({ ...call(tokens.Worker), Availability: 'x' }), /invalid Availability/);
  });

  it('admits a manager: a learner member at its peer URL, its peer certificate, the DEK; then promotes it', async () => {
    const { store, tokens, d, call } = await setup();
    const peer = newKeyPair();
    const answer = await d.join({
      ...call(tokens.Manager),
      PeerCSR: createCsr(peer.privateKey, 'p'),
      PeerPort: 2390,
    });
    assert.equal(answer.Role, 'manager');
    assert.match(new X509Certificate(answer.Certificate).subject, /OU=swarm-manager/);
    const m = answer.Manager;
    assert.ok(m);
    const peerCert = new X509Certificate(m.PeerCertificate);
    assert.equal(peerCert.subject, 'CN=berth-etcd-peer');
    assert.match(peerCert.subjectAltName ?? '', /IP Address:10\.0\.0\.2/);
    assert.deepEqual(m.InitialCluster, [
      { name: 'default', peerUrl: 'http://localhost:2380' },
      { name: answer.NodeID, peerUrl: 'https://10.0.0.2:2390' },
    ]);
    assert.equal(Buffer.from(m.DEK, 'base64').length, 32);
    assert.equal((await store.memberList()).find((x) => x.id === m.MemberID)?.isLearner, true);
    await d.promote(answer.NodeID, m.MemberID);
    assert.equal((await store.memberList()).find((x) => x.id === m.MemberID)?.isLearner, false);
    await d.promote(answer.NodeID, m.MemberID);
    const worker = await d.join(call(tokens.Worker));
    await assert.rejects(d.promote(worker.NodeID, m.MemberID), { kind: 'Forbidden' });
  });

  it('keeps a node live while it beats and lets it lapse after 3 periods', async () => {
    const { store, tokens, d, call, advance } = await setup();
    const { NodeID } = await d.join(call(tokens.Worker));
    for (let i = 0; i < 5; i++) {
      advance(5000);
      await d.heartbeat(NodeID);
    }
    assert.ok(await store.get(keys.live(NodeID)));
    advance(15_000);
    assert.equal(await store.get(keys.live(NodeID)), undefined);
    await d.heartbeat(NodeID);
    assert.ok(await store.get(keys.live(NodeID)), 'a node that comes back is live again');
    await assert.rejects(d.heartbeat('unknown'), { kind: 'Forbidden' });
  });

  it('renews with the role etcd holds: a promotion changes the OU, a removed node gets nothing', async () => {
    const { store, ca, tokens, d, call } = await setup();
    const { NodeID } = await d.join(call(tokens.Worker));
    assert.equal((await d.heartbeat(NodeID)).Role, 'worker');
    const next = newKeyPair();
    const renewed = await d.renew(NodeID, { CSR: createCsr(next.privateKey, 'r') });
    assert.equal(renewed.Role, 'worker');
    const cert = new X509Certificate(renewed.Certificate);
    assert.equal(cert.subject, `O=cluster1\nOU=swarm-worker\nCN=${NodeID}`);
    assert.ok(ca.verifies(renewed.Certificate));
    assert.equal(
      cert.publicKey.export({ type: 'spki', format: 'pem' }),
      next.publicKey.export({ type: 'spki', format: 'pem' }),
    );
    const kv = await store.get(keys.node(NodeID));
    const node = JSON.parse(kv?.value ?? '{}');
    node.Spec.Role = 'manager';
    await store.put(keys.node(NodeID), JSON.stringify(node));
    assert.equal((await d.heartbeat(NodeID)).Role, 'manager', 'the heartbeat tells the node');
    const promoted = await d.renew(NodeID, { CSR: createCsr(next.privateKey, 'r') });
    assert.match(new X509Certificate(promoted.Certificate).subject, /OU=swarm-manager/);
    await assert.rejects(d.renew(NodeID, { CSR: 'junk' }), { kind: 'InvalidParameter' });
    await store.delete(keys.node(NodeID));
    await assert.rejects(d.renew(NodeID, { CSR: createCsr(next.privateKey, 'r') }), { kind: 'Forbidden' });
    await assert.rejects(d.heartbeat(NodeID), { kind: 'Forbidden' });
  });

  it("adds a promoted node's learner member, only for a manager not yet in the raft", async () => {
    const { store, tokens, d, call } = await setup();
    const { NodeID } = await d.join(call(tokens.Worker));
    const peer = newKeyPair();
    const ask = { PeerCSR: createCsr(peer.privateKey, 'p'), PeerPort: 2390, AdvertiseHost: '10.0.0.2' };
    await assert.rejects(d.addManager(NodeID, ask), { kind: 'Forbidden' });
    const node = JSON.parse((await store.get(keys.node(NodeID)))?.value ?? '{}');
    node.Spec.Role = 'manager';
    await store.put(keys.node(NodeID), JSON.stringify(node));
    const first = await d.addManager(NodeID, ask);
    assert.equal(new X509Certificate(first.PeerCertificate).subject, 'CN=berth-etcd-peer');
    // an attempt that never started its member is replaced, not doubled
    const second = await d.addManager(NodeID, ask);
    const learners = (await store.memberList()).filter((x) => x.isLearner);
    assert.deepEqual(
      learners.map((x) => x.id),
      [second.MemberID],
    );
    assert.notEqual(first.MemberID, second.MemberID);
    await store.put(keys.manager(NodeID), JSON.stringify({ memberId: second.MemberID }));
    await assert.rejects(d.addManager(NodeID, ask), /already a member of the raft cluster/);
  });

  it('reads back the key of a CSR and refuses a tampered one', () => {
    const key = newKeyPair();
    const csr = createCsr(key.privateKey, 'n');
    assert.equal(
      csrPublicKey(csr).export({ type: 'spki', format: 'pem' }),
      key.publicKey.export({ type: 'spki', format: 'pem' }),
    );
    const body = csr.split('\n').slice(1, -2).join('');
    const der = Buffer.from(body, 'base64');
    der[der.length - 5] ^= 0xff;
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    assert.throws(() => csrPublicKey(tampered));
  });
});

describe('a root rotation through the dispatcher', () => {
  it('signs with the new root (chained to the old), tells the nodes, and switches once all are on it', async () => {
    const { store, ca, dek, tokens, d, call } = await setup();
    const { NodeID } = await d.join(call(tokens.Worker));
    const next = RootCa.create();
    const nextRecord = {
      cert: next.certPem,
      key: seal(dek, next.material.keyPem),
      crossSigned: ca.crossSign(next.certPem),
    };
    await store.put(keys.caNext, JSON.stringify(nextRecord));
    const beat = await d.heartbeat(NodeID);
    assert.equal(beat.TrustRoots, ca.certPem + next.certPem);
    assert.equal(beat.Issuer, next.certPem);
    assert.equal(await d.rootCa(), ca.certPem, 'joins pin the current root until the switch');
    // a node that is up and not yet on the new root holds the switch back
    assert.equal(await finishRotationIfDone(store, new Date()), false);
    const key = newKeyPair();
    const renewed = await d.renew(NodeID, {
      CSR: createCsr(key.privateKey, 'r'),
      TrustRoot: beat.TrustRoots,
    });
    const [leaf, cross] = splitPem(renewed.Certificate);
    assert.ok(leaf && cross);
    assert.ok(next.verifies(leaf));
    assert.ok(ca.verifies(cross), 'the cross-signed root chains to the old one');
    assert.ok(new X509Certificate(leaf).checkIssued(new X509Certificate(cross)));
    const node = JSON.parse((await store.get(keys.node(NodeID)))?.value ?? '{}');
    assert.equal(node.Description.TLSInfo.CertIssuerPublicKey, tlsInfoOf(next.certPem).CertIssuerPublicKey);
    assert.equal(node.Description.TLSInfo.TrustRoot, ca.certPem + next.certPem);
    // the manager record m1 has no node: only nodes count
    assert.equal(await finishRotationIfDone(store, new Date()), true);
    assert.equal(await store.get(keys.caNext), undefined);
    assert.equal(JSON.parse((await store.get(keys.caRoot))?.value ?? '{}').cert, next.certPem);
    const cluster = JSON.parse((await store.get(keys.cluster))?.value ?? '{}');
    assert.equal(cluster.RootRotationInProgress, false);
    assert.equal(cluster.JoinTokens.Worker.split('-')[2], caDigest(next.certPem));
    assert.notEqual(cluster.JoinTokens.Worker, tokens.Worker);
    const after = await d.heartbeat(NodeID);
    assert.equal(after.TrustRoots, next.certPem);
    await assert.rejects(d.join(call(tokens.Worker)), { message: BAD_TOKEN });
  });

  it('picks the root an update asks for', () => {
    const root = RootCa.create();
    const state = { root: { cert: root.certPem, key: '' }, rootRevision: 1 };
    const now = new Date();
    assert.equal(requestedRoot({ forced: false }, state, now), undefined);
    assert.equal(requestedRoot({ forced: false, SigningCACert: root.certPem }, state, now), undefined);
    assert.ok(requestedRoot({ forced: true }, state, now));
    const given = RootCa.create();
    assert.throws(
      () => requestedRoot({ forced: false, SigningCACert: given.certPem }, state, now),
      /there must be at least one valid, reachable external CA/,
    );
    const picked = requestedRoot(
      { forced: false, SigningCACert: given.certPem, SigningCAKey: given.material.keyPem },
      state,
      now,
    );
    assert.equal(picked?.certPem, given.certPem);
    assert.throws(
      () =>
        requestedRoot(
          { forced: false, SigningCACert: given.certPem, SigningCAKey: RootCa.create().material.keyPem },
          state,
          now,
        ),
      /certificate key mismatch/,
    );
    const leaf = given.issueNode('n', 'worker', 'c', 3600_000);
    assert.throws(
      () =>
        requestedRoot({ forced: false, SigningCACert: leaf.certPem, SigningCAKey: leaf.keyPem }, state, now),
      /not a CA certificate/,
    );
  });
});
