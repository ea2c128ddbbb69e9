import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestEngine } from '../../helpers/engine.js';
import { runCommand } from '../../helpers/process.js';
import { freePort, initLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * Swarm secrets and configs (issue 14 §7) on a one-manager swarm with its real etcd member,
 * through the docker CLI and raw HTTP. Texts compared are dockerd 20.10's for the same commands.
 */

const NOT_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';

describe('swarm secrets and configs (one manager, docker CLI)', () => {
  let engine: TestEngine;

  before(async () => {
    const peerPort = await freePort();
    const listenPort = await freePort();
    engine = await TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] });
    const out = await engine.docker(['secret', 'ls']);
    assert.equal(out.code, 1);
    assert.equal(out.stderr.trim(), `Error response from daemon: ${NOT_MANAGER}`);
    const cfg = await engine.request('GET', '/configs');
    assert.equal(cfg.status, 503);
    await initLoopbackSwarm(engine, listenPort);
  });
  after(async () => {
    await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await engine?.destroy();
  });

  it('creates, lists, inspects and removes secrets as dockerd prints them', async () => {
    const id = await engine.dockerOk(['secret', 'create', '--label', 'a=b', 's1', '-'], {
      input: 'very-secret-plaintext',
    });
    assert.match(id, /^[0-9a-z]{25}$/);
    const ls = (await engine.dockerOk(['secret', 'ls'])).split('\n');
    assert.equal(ls[0], 'ID                          NAME      DRIVER    CREATED                  UPDATED');
    assert.match(
      ls[1] ?? '',
      new RegExp(`^${id}   s1                  (Less than a second|\\d+ seconds?) ago`),
    );
    const [obj] = JSON.parse(await engine.dockerOk(['secret', 'inspect', 's1']));
    assert.deepEqual(Object.keys(obj), ['ID', 'Version', 'CreatedAt', 'UpdatedAt', 'Spec']);
    assert.deepEqual(obj.Spec, { Name: 's1', Labels: { a: 'b' } });
    assert.match(obj.CreatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/);
    const pretty = (await engine.dockerOk(['secret', 'inspect', '--pretty', id])).split('\n');
    assert.deepEqual(pretty.slice(0, 5), [
      `ID:              ${id}`,
      'Name:              s1',
      'Labels:',
      ' - a=b',
      'Driver:            ',
    ]);
    assert.match(pretty[5] ?? '', /^Created at: {8}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \+0000 utc$/);

    const dup = await engine.docker(['secret', 'create', 's1', '-'], { input: 'x' });
    assert.equal(
      dup.stderr.trim(),
      'Error response from daemon: rpc error: code = AlreadyExists desc = secret s1 already exists',
    );
    const bad = await engine.docker(['secret', 'create', 'bad name', '-'], { input: 'x' });
    assert.equal(
      bad.stderr.trim(),
      'Error response from daemon: rpc error: code = InvalidArgument desc = invalid name, only 64 [a-zA-Z0-9-_.] characters allowed, and the start and end character must be [a-zA-Z0-9]',
    );
    const big = await engine.docker(['secret', 'create', 'big', '-'], { input: Buffer.alloc(512000) });
    assert.match(big.stderr, /secret data must be larger than 0 and less than 512000 bytes/);

    // sealed with the DEK in etcd: etcdctl on the member's socket shows no trace of the plaintext
    const socket = join(engine.execRoot, 'swarm', 'etcd.sock:0');
    const dump = await runCommand(
      'etcdctl',
      ['--endpoints', `unix://${socket}`, 'get', '--prefix', '/berth'],
      {
        env: { ETCDCTL_API: '3' },
      },
    );
    assert.equal(dump.code, 0, dump.stderr);
    assert.ok(dump.stdout.includes(`/berth/swarm/v1/secrets/${id}`), 'the secret is stored');
    assert.ok(!dump.stdout.includes('very-secret-plaintext'));
    assert.ok(!dump.stdout.includes(Buffer.from('very-secret-plaintext').toString('base64')));

    const rm = await engine.docker(['secret', 'rm', 's1', 'nope']);
    assert.equal(rm.code, 1);
    assert.equal(rm.stdout.trim(), 's1');
    assert.equal(rm.stderr.trim(), 'Error response from daemon: secret nope not found');
    assert.equal(await engine.dockerOk(['secret', 'ls', '-q']), '');
  });

  it('answers the API as dockerd: 201, 204, filters, label-only updates by version, Templating from 1.37', async () => {
    const data = Buffer.from('hi').toString('base64');
    const created = await engine.request('POST', '/v1.41/secrets/create', {
      body: { Name: 's4', Data: data, Templating: { Name: 'golang' } },
    });
    assert.equal(created.status, 201);
    const { ID } = JSON.parse(created.body.toString());
    const got = JSON.parse((await engine.request('GET', `/v1.41/secrets/${ID}`)).body.toString());
    assert.deepEqual(got.Spec, { Name: 's4', Labels: {}, Templating: { Name: 'golang' } });
    const old = JSON.parse((await engine.request('GET', '/v1.36/secrets/s4')).body.toString());
    assert.deepEqual(old.Spec, { Name: 's4', Labels: {} });
    const refused = await engine.request('POST', '/v1.36/secrets/create', {
      body: { Name: 's5', Data: data, Templating: { Name: 'golang' } },
    });
    assert.equal(refused.status, 400);
    assert.equal(
      JSON.parse(refused.body.toString()).message,
      'secret templating is not supported on the specified API version: 1.36',
    );
    const b64 = await engine.request('POST', '/secrets/create', { body: { Name: 's5', Data: '!!!' } });
    assert.equal(b64.status, 400);

    const v = got.Version.Index;
    const noVersion = await engine.request('POST', '/secrets/s4/update', { body: { Name: 's4' } });
    assert.equal(noVersion.status, 400);
    assert.equal(JSON.parse(noVersion.body.toString()).message, 'invalid secret version');
    const rename = await engine.request('POST', `/secrets/s4/update?version=${v}`, { body: { Name: 's4x' } });
    assert.equal(rename.status, 400);
    assert.match(JSON.parse(rename.body.toString()).message, /only updates to Labels are allowed$/);
    const stale = await engine.request('POST', `/secrets/s4/update?version=${v + 100}`, {
      body: { Name: 's4', Labels: { x: 'y' } },
    });
    assert.equal(stale.status, 409);
    assert.match(JSON.parse(stale.body.toString()).message, /update out of sequence$/);
    const ok = await engine.request('POST', `/secrets/s4/update?version=${v}`, {
      body: { Name: 's4', Labels: { x: 'y' } },
    });
    assert.equal(ok.status, 200);

    const list = async (filters: unknown) =>
      JSON.parse(
        (
          await engine.request('GET', `/secrets?filters=${encodeURIComponent(JSON.stringify(filters))}`)
        ).body.toString(),
      ).map((s: { Spec: { Name: string } }) => s.Spec.Name);
    assert.deepEqual(await list({ label: ['x=y'] }), ['s4']);
    assert.deepEqual(await list({ name: ['s'] }), ['s4']);
    assert.deepEqual(await list({ names: ['s'] }), []);
    const badFilter = await engine.request(
      'GET',
      `/secrets?filters=${encodeURIComponent('{"bogus":["s"]}')}`,
    );
    assert.equal(badFilter.status, 400);
    assert.equal(JSON.parse(badFilter.body.toString()).message, "Invalid filter 'bogus'");

    assert.equal((await engine.request('DELETE', '/secrets/s4')).status, 204);
    assert.equal((await engine.request('DELETE', '/secrets/s4')).status, 404);
  });

  it('creates configs whose data is shown, with --template-driver, and prints them as dockerd', async () => {
    const id = await engine.dockerOk(
      ['config', 'create', '--label', 'q=r', '--template-driver', 'golang', 'c1', '-'],
      {
        input: 'hi\n',
      },
    );
    const [obj] = JSON.parse(await engine.dockerOk(['config', 'inspect', 'c1']));
    assert.equal(obj.ID, id);
    assert.deepEqual(obj.Spec, {
      Name: 'c1',
      Labels: { q: 'r' },
      Data: 'aGkK',
      Templating: { Name: 'golang' },
    });
    const pretty = (await engine.dockerOk(['config', 'inspect', '--pretty', 'c1'])).split('\n');
    assert.deepEqual(pretty.slice(0, 4), [`ID:\t\t\t${id}`, 'Name:\t\t\tc1', 'Labels:', ' - q=r']);
    assert.deepEqual(pretty.slice(-2), ['Data:', 'hi']);
    const ls = (await engine.dockerOk(['config', 'ls'])).split('\n');
    assert.equal(ls[0], 'ID                          NAME      CREATED                  UPDATED');
    assert.ok(ls[1]?.startsWith(`${id}   c1        `));
    const empty = await engine.request('POST', '/configs/create', { body: { Name: 'c2' } });
    assert.equal(empty.status, 400);
    assert.equal(
      JSON.parse(empty.body.toString()).message,
      'rpc error: code = InvalidArgument desc = config data must be larger than 0 and less than 1024000 bytes',
    );
    assert.equal(await engine.dockerOk(['config', 'rm', 'c1']), 'c1');
    const gone = await engine.docker(['config', 'inspect', 'c1']);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /config c1 not found/);
  });
});
