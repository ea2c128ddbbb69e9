import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestEngine } from '../../helpers/engine.js';
import { freePort } from '../../helpers/swarm-etcd.js';

/**
 * Swarm mode's §1 on one engine through the real docker CLI and raw HTTP, with a real etcd member
 * (its peer port a free one on loopback). The texts compared are dockerd 20.10's, as it printed
 * them for the same commands on this machine.
 */

interface SwarmView {
  ID: string;
  Version: { Index: number };
  Spec: {
    Orchestration: { TaskHistoryRetentionLimit: number };
    Raft: Record<string, number>;
    Dispatcher: { HeartbeatPeriod: number };
    CAConfig: { NodeCertExpiry: number };
    EncryptionConfig: { AutoLockManagers: boolean };
  };
  TLSInfo: { TrustRoot: string; CertIssuerSubject: string; CertIssuerPublicKey: string };
  DefaultAddrPool: string[];
  SubnetSize: number;
  DataPathPort: number;
  JoinTokens: { Worker: string; Manager: string };
}

function caDigest(pem: string): string {
  return BigInt(`0x${createHash('sha256').update(pem).digest('hex')}`)
    .toString(36)
    .padStart(50, '0');
}

async function etcdPid(engine: TestEngine): Promise<number> {
  return Number((await readFile(join(engine.execRoot, 'swarm', 'etcd.pid'), 'utf8')).trim());
}

/** A live process (a zombie's command line is empty). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8') !== '';
  } catch {
    return false;
  }
}

describe('swarm init, update, tokens, unlock key and leave (one engine, docker CLI)', () => {
  let engine: TestEngine;
  let listenPort: number;

  before(async () => {
    const peerPort = await freePort();
    listenPort = await freePort();
    engine = await TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] });
  });
  after(async () => {
    // a swarm left behind (a failed test) takes its etcd member with it
    await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await engine?.destroy();
  });

  it('refuses bad init requests with 400 and stays out of a swarm', async () => {
    const cases: [unknown, RegExp][] = [
      [{ ListenAddr: 'bogus::x' }, /^invalid ListenAddr "bogus::x"/],
      [{ ListenAddr: '127.0.0.1:99999' }, /^invalid ListenAddr/],
      [{ AdvertiseAddr: 'nosuchif0' }, /^invalid AdvertiseAddr: no such interface "nosuchif0"/],
      [{ AdvertiseAddr: '127.0.0.1', DataPathPort: 80 }, /^data path port 80 is out of range \(1024-49151\)/],
      [
        { AdvertiseAddr: '127.0.0.1', Spec: { CAConfig: { NodeCertExpiry: 60e9 } } },
        /^minimum certificate expiry time is: 1h0m0s$/,
      ],
      [{ AdvertiseAddr: '127.0.0.1', Availability: 'sometimes' }, /^invalid Availability: "sometimes"$/],
      [{ AdvertiseAddr: '127.0.0.1', DefaultAddrPool: ['10.0.0.0/33'] }, /^invalid default address pool/],
      [{ AdvertiseAddr: '127.0.0.1', Spec: { Name: 'other' } }, /^swarm spec must be named "default"$/],
      [
        { ListenAddr: 7 },
        /^json: cannot unmarshal number into Go struct field InitRequest.ListenAddr of type string$/,
      ],
    ];
    for (const [body, message] of cases) {
      const r = await engine.request('POST', '/v1.41/swarm/init', { body });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text()}`);
      assert.match(r.json<{ message: string }>().message, message);
    }
    const bad = await engine.request('POST', '/v1.41/swarm/init', {
      body: Buffer.from('{'),
      headers: { 'Content-Type': 'application/json' },
    });
    assert.equal(bad.status, 400);
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'inactive');
    assert.equal(existsSync(join(engine.dataRoot, 'swarm')), false);
  });

  it('inits with the options given and prints the join command as dockerd', async () => {
    const out = await engine.dockerOk([
      'swarm',
      'init',
      '--advertise-addr',
      '127.0.0.1',
      '--listen-addr',
      `127.0.0.1:${listenPort}`,
      '--data-path-port',
      '5789',
      '--default-addr-pool',
      '10.20.0.0/16',
      '--default-addr-pool-mask-length',
      '26',
      '--task-history-limit',
      '3',
      '--dispatcher-heartbeat',
      '2s',
      '--cert-expiry',
      '240h',
    ]);
    const info = JSON.parse(await engine.dockerOk(['info', '--format', '{{json .Swarm}}']));
    assert.equal(info.LocalNodeState, 'active');
    assert.equal(info.ControlAvailable, true);
    assert.equal(info.NodeAddr, '127.0.0.1');
    assert.match(info.NodeID, /^[0-9a-z]{25}$/);
    assert.deepEqual(info.RemoteManagers, [{ NodeID: info.NodeID, Addr: `127.0.0.1:${listenPort}` }]);
    assert.equal(info.Nodes, 1);
    assert.equal(info.Managers, 1);
    const swarm = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    assert.equal(
      out,
      [
        `Swarm initialized: current node (${info.NodeID}) is now a manager.`,
        '',
        'To add a worker to this swarm, run the following command:',
        '',
        `    docker swarm join --token ${swarm.JoinTokens.Worker} 127.0.0.1:${listenPort}`,
        '',
        "To add a manager to this swarm, run 'docker swarm join-token manager' and follow the instructions.",
      ].join('\n'),
    );
    assert.equal(info.Cluster.ID, swarm.ID);
    assert.equal(swarm.Spec.Orchestration.TaskHistoryRetentionLimit, 3);
    assert.equal(swarm.Spec.Dispatcher.HeartbeatPeriod, 2e9);
    assert.equal(swarm.Spec.CAConfig.NodeCertExpiry, 240 * 3600e9);
    assert.deepEqual(swarm.Spec.Raft, {
      SnapshotInterval: 10000,
      KeepOldSnapshots: 0,
      LogEntriesForSlowFollowers: 500,
      ElectionTick: 10,
      HeartbeatTick: 1,
    });
    assert.deepEqual(swarm.DefaultAddrPool, ['10.20.0.0/16']);
    assert.equal(swarm.SubnetSize, 26);
    assert.equal(swarm.DataPathPort, 5789);
    assert.match(swarm.TLSInfo.TrustRoot, /^-----BEGIN CERTIFICATE-----\n/);
    // dockerd's issuer subject for CN=swarm-ca is this DER; berth's names swarm-ca too
    assert.ok(Buffer.from(swarm.TLSInfo.CertIssuerSubject, 'base64').includes(Buffer.from('swarm-ca')));
    const digest = caDigest(swarm.TLSInfo.TrustRoot);
    for (const token of [swarm.JoinTokens.Worker, swarm.JoinTokens.Manager]) {
      assert.match(token, new RegExp(`^SWMTKN-1-${digest}-[0-9a-z]{25}$`));
    }
    assert.notEqual(swarm.JoinTokens.Worker, swarm.JoinTokens.Manager);
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'active/manager');
    assert.equal((await engine.request('HEAD', '/_ping')).headers.swarm, 'active/manager');
  });

  it('prints the swarm block of docker info as dockerd', async () => {
    const info = await engine.dockerOk(['info']);
    const block = info.slice(info.indexOf(' Swarm: active'), info.indexOf(' Runtimes:'));
    const id = (await engine.dockerOk(['info', '--format', '{{.Swarm.NodeID}} {{.Swarm.Cluster.ID}}'])).split(
      ' ',
    );
    assert.equal(
      block,
      [
        ' Swarm: active',
        `  NodeID: ${id[0]}`,
        '  Is Manager: true',
        `  ClusterID: ${id[1]}`,
        '  Managers: 1',
        '  Nodes: 1',
        '  Default Address Pool: 10.20.0.0/16  ',
        '  SubnetSize: 26',
        '  Data Path Port: 5789',
        '  Orchestration:',
        '   Task History Retention Limit: 3',
        '  Raft:',
        '   Snapshot Interval: 10000',
        '   Number of Old Snapshots to Retain: 0',
        '   Heartbeat Tick: 1',
        '   Election Tick: 10',
        '  Dispatcher:',
        '   Heartbeat Period: 2 seconds',
        '  CA Configuration:',
        '   Expiry Duration: 10 days',
        '   Force Rotate: 0',
        '  Autolock Managers: false',
        '  Root Rotation In Progress: false',
        '  Node Address: 127.0.0.1',
        '  Manager Addresses:',
        `   127.0.0.1:${listenPort}`,
        '',
      ].join('\n'),
    );
    const nodes = await engine.dockerOk([
      'node',
      'ls',
      '--format',
      '{{.Self}} {{.Status}} {{.Availability}} {{.ManagerStatus}}',
    ]);
    assert.equal(nodes, 'true Ready Active Leader');
  });

  it('rotates one join token at a time; the other stays', async () => {
    const worker = await engine.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    const manager = await engine.dockerOk(['swarm', 'join-token', '-q', 'manager']);
    const rotated = await engine.dockerOk(['swarm', 'join-token', '--rotate', 'worker']);
    assert.match(
      rotated,
      /^Successfully rotated worker join token\.\n\nTo add a worker to this swarm, run the following command:\n\n {4}docker swarm join --token SWMTKN-1-\S+ 127\.0\.0\.1:\d+$/,
    );
    const worker2 = await engine.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    assert.notEqual(worker2, worker);
    assert.ok(rotated.includes(worker2));
    assert.equal(await engine.dockerOk(['swarm', 'join-token', '-q', 'manager']), manager);
    const rawRotate = await engine.request('GET', '/v1.41/swarm');
    const s = rawRotate.json<SwarmView>();
    const r = await engine.request(
      'POST',
      `/v1.41/swarm/update?version=${s.Version.Index}&rotateManagerToken=true`,
      {
        body: s.Spec,
      },
    );
    assert.equal(r.status, 200, r.text());
    const after = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    assert.notEqual(after.JoinTokens.Manager, manager);
    assert.equal(after.JoinTokens.Worker, worker2);
  });

  it('updates the spec as given, checks the version and refuses bad values', async () => {
    assert.equal(
      await engine.dockerOk([
        'swarm',
        'update',
        '--task-history-limit',
        '7',
        '--cert-expiry',
        '48h',
        '--dispatcher-heartbeat',
        '3s',
        '--snapshot-interval',
        '5000',
        '--max-snapshots',
        '2',
      ]),
      'Swarm updated.',
    );
    const s = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    assert.equal(s.Spec.Orchestration.TaskHistoryRetentionLimit, 7);
    assert.equal(s.Spec.CAConfig.NodeCertExpiry, 48 * 3600e9);
    assert.equal(s.Spec.Dispatcher.HeartbeatPeriod, 3e9);
    assert.equal(s.Spec.Raft.SnapshotInterval, 5000);
    assert.equal(s.Spec.Raft.KeepOldSnapshots, 2);
    const short = await engine.docker(['swarm', 'update', '--cert-expiry', '30m']);
    assert.notEqual(short.code, 0);
    assert.match(short.stderr, /minimum certificate expiry time is: 1h0m0s/);
    const stale = await engine.request('POST', `/v1.41/swarm/update?version=${s.Version.Index - 1}`, {
      body: s.Spec,
    });
    assert.equal(stale.status, 409);
    assert.match(stale.json<{ message: string }>().message, /update out of sequence$/);
    const none = await engine.request('POST', '/v1.41/swarm/update', { body: s.Spec });
    assert.equal(none.status, 400);
    assert.deepEqual(none.json(), {
      message: `invalid swarm version '': strconv.ParseUint: parsing "": invalid syntax`,
    });
    const word = await engine.request('POST', '/v1.41/swarm/update?version=abc', { body: s.Spec });
    assert.equal(word.status, 400);
    const flag = await engine.request(
      'POST',
      `/v1.41/swarm/update?version=${s.Version.Index}&rotateWorkerToken=maybe`,
      {
        body: s.Spec,
      },
    );
    assert.equal(flag.status, 400);
    // nothing changed by the refused ones
    assert.equal(
      (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>().Version.Index,
      s.Version.Index,
    );
  });

  it('makes, shows and rotates the unlock key with autolock', async () => {
    const none = await engine.docker(['swarm', 'unlock-key']);
    assert.notEqual(none.code, 0);
    assert.match(none.stderr, /no unlock key is set/);
    const on = await engine.dockerOk(['swarm', 'update', '--autolock=true']);
    const key = /(SWMKEY-1-[A-Za-z0-9+/]{43})/.exec(on)?.[1];
    assert.ok(key, on);
    assert.match(
      on,
      /^Swarm updated\.\nTo unlock a swarm manager after it restarts, run the `docker swarm unlock`\ncommand and provide the following key:\n\n {4}SWMKEY-1-/,
    );
    assert.equal(await engine.dockerOk(['swarm', 'unlock-key', '-q']), key);
    assert.deepEqual((await engine.request('GET', '/v1.41/swarm/unlockkey')).json(), { UnlockKey: key });
    const rotated = await engine.dockerOk(['swarm', 'unlock-key', '--rotate']);
    assert.match(rotated, /^Successfully rotated manager unlock key\./);
    const key2 = await engine.dockerOk(['swarm', 'unlock-key', '-q']);
    assert.notEqual(key2, key);
    assert.ok(rotated.includes(key2));
    const s = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    assert.equal(s.Spec.EncryptionConfig.AutoLockManagers, true);
    const notLocked = await engine.request('POST', '/v1.41/swarm/unlock', { body: { UnlockKey: key2 } });
    assert.equal(notLocked.status, 409);
    assert.deepEqual(notLocked.json(), { message: 'swarm is not locked' });
    await engine.dockerOk(['swarm', 'update', '--autolock=false']);
    assert.match((await engine.docker(['swarm', 'unlock-key'])).stderr, /no unlock key is set/);
  });

  it('comes back locked after a restart with autolock, and opens with the right key only', async () => {
    const on = await engine.dockerOk(['swarm', 'update', '--autolock=true']);
    const key = /(SWMKEY-1-[A-Za-z0-9+/]{43})/.exec(on)?.[1] ?? '';
    const certs = join(engine.dataRoot, 'swarm', 'certs');
    assert.match(
      await readFile(join(certs, 'dek'), 'utf8'),
      /^v1:/,
      'the DEK is sealed under the unlock key',
    );
    assert.doesNotMatch(await readFile(join(certs, 'swarm-node.key'), 'utf8'), /PRIVATE KEY/);
    await engine.restart();
    assert.equal(await engine.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'locked');
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'locked');
    assert.equal(
      existsSync(join(engine.execRoot, 'swarm', 'etcd.pid')),
      false,
      'a locked manager runs no etcd',
    );
    const locked = await engine.request('GET', '/v1.41/swarm');
    assert.equal(locked.status, 503);
    assert.deepEqual(locked.json(), {
      message:
        'Swarm is encrypted and needs to be unlocked before it can be used. Please use "docker swarm unlock" to unlock it.',
    });
    const wrongKey = `SWMKEY-1-${'A'.repeat(43)}`;
    const wrong = await engine.docker(['swarm', 'unlock'], { input: `${wrongKey}\n` });
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /swarm could not be unlocked: invalid key provided/);
    const raw = await engine.request('POST', '/v1.41/swarm/unlock', { body: { UnlockKey: 'nonsense' } });
    assert.equal(raw.status, 401);
    await engine.dockerOk(['swarm', 'unlock'], { input: `${key}\n` });
    assert.equal(await engine.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'active');
    assert.equal(await engine.dockerOk(['swarm', 'unlock-key', '-q']), key);
    assert.equal(
      (await engine.request('POST', '/v1.41/swarm/unlock', { body: { UnlockKey: key } })).status,
      409,
    );
    // autolock off: the keys are plain again and a restart comes up active
    await engine.dockerOk(['swarm', 'update', '--autolock=false']);
    assert.doesNotMatch(await readFile(join(certs, 'dek'), 'utf8'), /^v1:/);
    await engine.restart();
    assert.equal(await engine.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'active');
  });

  it('refuses init and join while in a swarm, and leave without force on the last manager', async () => {
    const already =
      'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';
    const init = await engine.request('POST', '/v1.41/swarm/init', { body: { AdvertiseAddr: '127.0.0.1' } });
    assert.equal(init.status, 503);
    assert.deepEqual(init.json(), { message: already });
    const join = await engine.request('POST', '/v1.41/swarm/join', {
      body: { RemoteAddrs: ['127.0.0.1:2377'], JoinToken: 'x' },
    });
    assert.equal(join.status, 503);
    assert.deepEqual(join.json(), { message: already });
    const leave = await engine.docker(['swarm', 'leave']);
    assert.notEqual(leave.code, 0);
    assert.equal(
      leave.stderr.trim(),
      'Error response from daemon: You are attempting to leave the swarm on a node that is participating as a manager. Removing the last manager erases all current state of the swarm. Use `--force` to ignore this message.',
    );
  });

  it('restarts its member alone with init --force-new-cluster, the swarm kept', async () => {
    const before = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    const id = await engine.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    const pid = await etcdPid(engine);
    const out = await engine.dockerOk([
      'swarm',
      'init',
      '--force-new-cluster',
      '--advertise-addr',
      '127.0.0.1',
    ]);
    assert.match(out, new RegExp(`^Swarm initialized: current node \\(${id}\\) is now a manager\\.`));
    assert.notEqual(await etcdPid(engine), pid, 'the member was restarted');
    const after = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    assert.equal(after.ID, before.ID);
    assert.deepEqual(after.JoinTokens, before.JoinTokens);
    assert.equal(await engine.dockerOk(['node', 'ls', '-q']), id);
  });

  it('keeps its swarm across an engine kill -9: the etcd member is adopted', async () => {
    const pid = await etcdPid(engine);
    const id = await engine.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']);
    await engine.kill9();
    assert.ok(alive(pid), 'the member outlives the engine');
    await engine.launch();
    assert.equal(await etcdPid(engine), pid);
    assert.equal(
      await engine.dockerOk(['info', '--format', '{{.Swarm.NodeID}} {{.Swarm.LocalNodeState}}']),
      `${id} active`,
    );
    assert.equal(await engine.dockerOk(['node', 'ls', '-q']), id);
  });

  it('leaves with --force: etcd ended, the swarm state gone, inactive again', async () => {
    const pid = await etcdPid(engine);
    assert.equal(await engine.dockerOk(['swarm', 'leave', '--force']), 'Node left the swarm.');
    assert.ok(!alive(pid));
    assert.equal(existsSync(join(engine.dataRoot, 'swarm')), false);
    assert.equal(existsSync(join(engine.execRoot, 'swarm', 'etcd.sock:0')), false);
    assert.equal(await engine.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'inactive');
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'inactive');
    const r = await engine.request('GET', '/v1.41/swarm');
    assert.equal(r.status, 503);
    assert.equal((await engine.request('GET', '/v1.24/swarm')).status, 406);
    const again = await engine.request('POST', '/v1.41/swarm/leave');
    assert.deepEqual(again.json(), { message: 'This node is not part of a swarm' });
  });

  it("takes docker-py's init (advertise 127.0.0.1, listen 0.0.0.0:<port>) and API versions' fields", async () => {
    const port = await freePort();
    const r = await engine.request('POST', '/v1.38/swarm/init', {
      body: {
        AdvertiseAddr: '127.0.0.1',
        ListenAddr: `0.0.0.0:${port}`,
        DefaultAddrPool: ['10.30.0.0/16'],
        SubnetSize: 28,
        DataPathPort: 5000,
      },
    });
    assert.equal(r.status, 200, r.text());
    assert.match(r.json<string>(), /^[0-9a-z]{25}$/);
    const s = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    // below 1.39 the pool and subnet size are not read; below 1.40 the data path port
    assert.deepEqual(s.DefaultAddrPool, ['10.0.0.0/8']);
    assert.equal(s.SubnetSize, 24);
    assert.equal(s.DataPathPort, 4789);
    const info = JSON.parse(await engine.dockerOk(['info', '--format', '{{json .Swarm}}']));
    assert.deepEqual(info.RemoteManagers, [{ NodeID: r.json<string>(), Addr: `127.0.0.1:${port}` }]);
    assert.equal((await engine.request('POST', '/v1.41/swarm/leave?force=true')).status, 200);
    const v39 = await engine.request('POST', '/v1.39/swarm/init', {
      body: {
        // never the default 0.0.0.0:2377: tests beside this one may hold it
        ListenAddr: `127.0.0.1:${port}`,
        AdvertiseAddr: '127.0.0.1',
        DefaultAddrPool: ['10.30.0.0/16'],
        SubnetSize: 28,
        DataPathPort: 5000,
      },
    });
    assert.equal(v39.status, 200, v39.text());
    const s39 = (await engine.request('GET', '/v1.41/swarm')).json<SwarmView>();
    assert.deepEqual([s39.DefaultAddrPool, s39.SubnetSize, s39.DataPathPort], [['10.30.0.0/16'], 28, 4789]);
    assert.equal((await engine.request('POST', '/v1.41/swarm/leave?force=1')).status, 200);
  });
});
