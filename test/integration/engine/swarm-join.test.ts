import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { RootCa } from '../../../src/engine/swarm/ca/root-ca.js';
import { TestEngine } from '../../helpers/engine.js';
import { freePort } from '../../helpers/swarm-etcd.js';

/**
 * A worker joins a one-manager swarm: two engines on this host's loopback (a worker runs no etcd
 * and listens on nothing, so they share no port), through the docker CLI. The cluster API's
 * mutual TLS is checked from outside with raw https.
 */

function httpsStatus(port: number, path: string, tls: { cert?: string; key?: string } = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', rejectUnauthorized: false, ...tls, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

describe('swarm join as a worker (two engines, docker CLI)', () => {
  let manager: TestEngine;
  let worker: TestEngine;
  let apiPort: number;
  let since: number;

  before(async () => {
    apiPort = await freePort();
    const peerPort = await freePort();
    [manager, worker] = await Promise.all([
      TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] }),
      TestEngine.start({ bridge: 'none' }),
    ]);
    since = Math.floor(Date.now() / 1000) - 1;
    await manager.dockerOk([
      'swarm',
      'init',
      '--advertise-addr',
      '127.0.0.1',
      '--listen-addr',
      `127.0.0.1:${apiPort}`,
      '--dispatcher-heartbeat',
      '1s',
    ]);
  });
  after(async () => {
    await worker?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await manager?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await Promise.all([worker?.destroy(), manager?.destroy()]);
  });

  it('refuses a token for another CA and a token that is not current', async () => {
    const token = await manager.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    const digest = token.split('-')[2] ?? '';
    const otherDigest = BigInt(`0x${'ab'.repeat(32)}`)
      .toString(36)
      .padStart(50, '0');
    const foreign = token.replace(digest, otherDigest);
    const r1 = await worker.docker(['swarm', 'join', '--token', foreign, `127.0.0.1:${apiPort}`]);
    assert.notEqual(r1.code, 0);
    assert.match(r1.stderr, new RegExp(`remote CA does not match fingerprint. Expected: ${otherDigest}`));
    const stale = token.replace(/-[0-9a-z]{25}$/, `-${'1'.repeat(25)}`);
    const r2 = await worker.docker(['swarm', 'join', '--token', stale, `127.0.0.1:${apiPort}`]);
    assert.notEqual(r2.code, 0);
    assert.match(r2.stderr, /A valid join token is necessary to join this cluster/);
    const r3 = await worker.request('POST', '/v1.41/swarm/join', {
      body: { RemoteAddrs: ['127.0.0.1:1'], JoinToken: 'x' },
    });
    assert.equal(r3.status, 400);
    assert.equal((await worker.request('GET', '/_ping')).headers.swarm, 'inactive');
  });

  it('joins with the worker token; both sides see it', async () => {
    const token = await manager.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    const out = await worker.dockerOk([
      'swarm',
      'join',
      '--token',
      token,
      '--advertise-addr',
      '127.0.0.1',
      `127.0.0.1:${apiPort}`,
    ]);
    assert.equal(out, 'This node joined a swarm as a worker.');
    const info = JSON.parse(await worker.dockerOk(['info', '--format', '{{json .Swarm}}']));
    const managerId = await manager.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    assert.equal(info.LocalNodeState, 'active');
    assert.equal(info.ControlAvailable, false);
    assert.deepEqual(info.RemoteManagers, [{ NodeID: managerId, Addr: `127.0.0.1:${apiPort}` }]);
    assert.equal(info.Cluster, undefined);
    assert.equal((await worker.request('GET', '/_ping')).headers.swarm, 'active/worker');
    const ls = await worker.docker(['node', 'ls']);
    assert.notEqual(ls.code, 0);
    assert.match(
      ls.stderr,
      /This node is not a swarm manager\. Worker nodes can't be used to view or modify cluster state\./,
    );
    const nodes = await manager.dockerOk([
      'node',
      'ls',
      '--format',
      '{{.ID}} {{.Status}} {{.ManagerStatus}}',
    ]);
    assert.deepEqual(
      nodes
        .split('\n')
        .map((l) => l.trim())
        .sort(),
      [`${info.NodeID} Ready`, `${managerId} Ready Leader`].sort(),
    );
    const inspected = JSON.parse(await manager.dockerOk(['node', 'inspect', info.NodeID]))[0];
    assert.equal(inspected.Spec.Role, 'worker');
    assert.equal(inspected.Status.Addr, '127.0.0.1');
    assert.equal(inspected.ManagerStatus, undefined);
    assert.equal(await manager.dockerOk(['info', '--format', '{{.Swarm.Nodes}} {{.Swarm.Managers}}']), '2 1');
    assert.equal(await manager.dockerOk(['node', 'ls', '-q', '--filter', 'role=worker']), info.NodeID);
    assert.equal(await manager.dockerOk(['node', 'ls', '-q', '--filter', 'role=manager']), managerId);
    const badFilter = await manager.docker(['node', 'ls', '--filter', 'colour=red']);
    assert.match(badFilter.stderr, /invalid filter 'colour'/);
    const again = await worker.docker(['swarm', 'join', '--token', token, `127.0.0.1:${apiPort}`]);
    assert.match(again.stderr, /This node is already part of a swarm/);
  });

  it('updates a node spec by version and refuses what it cannot do', async () => {
    const id = await worker.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    const managerId = await manager.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    await manager.dockerOk(['node', 'update', '--label-add', 'disk=ssd', '--label-add', 'zone=a', id]);
    await manager.dockerOk(['node', 'update', '--label-rm', 'zone', '--availability', 'drain', id]);
    const spec = JSON.parse(await manager.dockerOk(['node', 'inspect', id, '--format', '{{json .Spec}}']));
    assert.deepEqual(spec, { Labels: { disk: 'ssd' }, Role: 'worker', Availability: 'drain' });
    assert.equal(await manager.dockerOk(['node', 'ls', '-q', '--filter', 'node.label=disk=ssd']), id);
    const node = (await manager.request('GET', `/v1.41/nodes/${id}`)).json<{ Version: { Index: number } }>();
    const stale = await manager.request(
      'POST',
      `/v1.41/nodes/${id}/update?version=${node.Version.Index - 1}`,
      {
        body: { Role: 'worker', Availability: 'active' },
      },
    );
    assert.equal(stale.status, 409);
    const badRole = await manager.request('POST', `/v1.41/nodes/${id}/update?version=${node.Version.Index}`, {
      body: { Role: 'boss', Availability: 'active' },
    });
    assert.equal(badRole.status, 400);
    assert.match(badRole.json<{ message: string }>().message, /^invalid Role/);
    const badAvail = await manager.request(
      'POST',
      `/v1.41/nodes/${id}/update?version=${node.Version.Index}`,
      {
        body: { Role: 'worker', Availability: 'sometimes' },
      },
    );
    assert.match(badAvail.json<{ message: string }>().message, /^invalid Availability/);
    await manager.dockerOk(['node', 'update', '--availability', 'active', id]);
    const demote = await manager.docker(['node', 'demote', managerId]);
    assert.match(demote.stderr, /attempting to demote the last manager of the swarm/);
    const rmReady = await manager.docker(['node', 'rm', id]);
    assert.match(rmReady.stderr, new RegExp(`node ${id} is not down and can't be removed`));
    const rmManager = await manager.docker(['node', 'rm', '--force', managerId]);
    assert.match(
      rmManager.stderr,
      /is a cluster manager and is a member of the raft cluster\. It must be demoted to worker before removal/,
    );
    const unknown = await manager.request('DELETE', '/v1.41/nodes/nosuchnode');
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.json(), { message: 'node nosuchnode not found' });
  });

  it('serves the cluster API only with a certificate of this swarm', async () => {
    assert.equal(await httpsStatus(apiPort, '/v1/heartbeat'), 401);
    const other = RootCa.create();
    const foreign = other.issueNode('x'.repeat(25), 'worker', 'c', 3600_000);
    assert.equal(
      await httpsStatus(apiPort, '/v1/heartbeat', { cert: foreign.certPem, key: foreign.keyPem }),
      401,
    );
  });

  it('keeps the worker across its engine restart, and shows it down once it leaves', async () => {
    const id = await worker.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    await worker.restart();
    assert.equal(
      await worker.dockerOk(['info', '--format', '{{.Swarm.NodeID}} {{.Swarm.LocalNodeState}}']),
      `${id} active`,
    );
    assert.equal(await worker.dockerOk(['swarm', 'leave']), 'Node left the swarm.');
    assert.equal(await worker.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'inactive');
    let status = '';
    for (let i = 0; i < 60 && status !== 'Down'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      status = await manager
        .dockerOk(['node', 'inspect', id, '--format', '{{.Status.State}}'])
        .then((s) => (s === 'down' ? 'Down' : s));
    }
    assert.equal(status, 'Down', 'the manager marks the node down within 3 heartbeats');
    assert.equal(await manager.dockerOk(['node', 'rm', id]), id);
    // the manager's swarm-scope node events, as its etcd watch saw the changes
    let events = '';
    for (let i = 0; i < 20 && !events.includes('remove'); i++) {
      events = await manager.events(
        since,
        '{{.Scope}} {{.Action}} {{.Actor.ID}} {{json .Actor.Attributes}}',
        ['type=node', `node=${id}`],
      );
      if (!events.includes('remove')) await new Promise((r) => setTimeout(r, 200));
    }
    const lines = events.split('\n');
    assert.equal(
      lines[0],
      `swarm create ${id} {"name":"${await worker.dockerOk(['info', '--format', '{{.Name}}'])}"}`,
    );
    assert.ok(
      lines.some((l) => l.includes('"availability.new":"drain","availability.old":"active"')),
      events,
    );
    assert.ok(
      lines.some((l) => l.includes('"state.new":"down","state.old":"ready"')),
      events,
    );
    assert.match(lines.at(-1) ?? '', new RegExp(`^swarm remove ${id} `));
    assert.equal(await manager.events(since, '{{.Action}}', ['type=node', 'scope=local']), '');
    assert.equal(
      await manager.dockerOk(['node', 'ls', '-q']),
      await manager.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']),
    );
  });
});
