import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError, unavailable } from '../../../../../src/common/errors.js';
import { Logger } from '../../../../../src/common/log.js';
import { newDek } from '../../../../../src/engine/swarm/seal.js';
import { ObjectService } from '../../../../../src/engine/swarm/secrets/object.service.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';

function setup(kind: 'secret' | 'config') {
  const store = new MemoryStore();
  const dek = newDek();
  let manager = true;
  const swarm = {
    managerAccess: async () => {
      if (!manager) throw unavailable('This node is not a swarm manager.');
      return { store, dek };
    },
  };
  const svc = new ObjectService(kind, { swarm, log: new Logger('error'), now: () => new Date(1e12) });
  return { store, svc, demote: () => (manager = false) };
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

async function rejects(p: Promise<unknown>, kind: string, message: string | RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof BerthError, String(err));
    assert.equal(err.kind, kind);
    if (typeof message === 'string') assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  });
}

describe('secrets in the cluster store', () => {
  it('creates, finds by id, name and prefix, never shows the data, seals it in the store', async () => {
    const { store, svc } = setup('secret');
    const id = await svc.create({ Name: 'db_pass', Labels: { a: 'b' }, Data: b64('hunter2-plaintext') });
    assert.match(id, /^[0-9a-z]{25}$/);
    const got = await svc.inspect('db_pass');
    assert.equal(got.ID, id);
    assert.deepEqual(got.Spec, { Name: 'db_pass', Labels: { a: 'b' } });
    assert.equal(got.CreatedAt, new Date(1e12).toISOString());
    assert.equal((await svc.inspect(id)).ID, id);
    assert.equal((await svc.inspect(id.slice(0, 5))).ID, id);
    const kv = await store.get(`/berth/swarm/v1/secrets/${id}`);
    assert.ok(kv);
    assert.equal(got.Version.Index, kv.modRevision);
    const all = (await store.range('/berth/')).kvs.map((k) => k.value).join('\n');
    assert.ok(!all.includes('hunter2'));
    assert.ok(!all.includes(b64('hunter2-plaintext')));
    assert.equal((await store.get('/berth/swarm/v1/names/secrets/db_pass'))?.value, id);
  });

  it('refuses bad names, sizes, base64 and duplicates with swarmkit words', async () => {
    const { svc } = setup('secret');
    const badName =
      'rpc error: code = InvalidArgument desc = invalid name, only 64 [a-zA-Z0-9-_.] characters allowed, and the start and end character must be [a-zA-Z0-9]';
    await rejects(svc.create({ Name: 'bad name', Data: b64('x') }), 'InvalidParameter', badName);
    await rejects(svc.create({ Name: '-x', Data: b64('x') }), 'InvalidParameter', badName);
    await rejects(svc.create({ Name: 'a'.repeat(65), Data: b64('x') }), 'InvalidParameter', badName);
    await rejects(svc.create({ Data: b64('x') }), 'InvalidParameter', /name must be provided/);
    const size =
      'rpc error: code = InvalidArgument desc = secret data must be larger than 0 and less than 512000 bytes';
    await rejects(svc.create({ Name: 's' }), 'InvalidParameter', size);
    await rejects(
      svc.create({ Name: 's', Data: Buffer.alloc(512000).toString('base64') }),
      'InvalidParameter',
      size,
    );
    await svc.create({ Name: 'a'.repeat(64), Data: Buffer.alloc(511999).toString('base64') });
    await rejects(
      svc.create({ Name: 's', Data: '!!!' }),
      'InvalidParameter',
      'illegal base64 data at input byte 0',
    );
    await rejects(
      svc.create({ Name: 's', Data: 'aGk' }),
      'InvalidParameter',
      'illegal base64 data at input byte 0',
    );
    await svc.create({ Name: 's.1_x-2', Data: b64('x') });
    await rejects(
      svc.create({ Name: 's.1_x-2', Data: b64('y') }),
      'Conflict',
      'rpc error: code = AlreadyExists desc = secret s.1_x-2 already exists',
    );
  });

  it('updates only labels, by version; removes by name', async () => {
    const { svc } = setup('secret');
    await svc.create({ Name: 's', Data: b64('one') });
    const v = (await svc.inspect('s')).Version.Index;
    const only = 'rpc error: code = InvalidArgument desc = only updates to Labels are allowed';
    await rejects(svc.update('s', v, { Name: 't' }), 'InvalidParameter', only);
    await rejects(svc.update('s', v, { Name: 's', Data: b64('two') }), 'InvalidParameter', only);
    await rejects(
      svc.update('s', v + 5, { Name: 's', Labels: { x: 'y' } }),
      'Conflict',
      /update out of sequence$/,
    );
    await svc.update('s', v, { Name: 's', Data: b64('one'), Labels: { x: 'y' } });
    const after = await svc.inspect('s');
    assert.deepEqual(after.Spec.Labels, { x: 'y' });
    assert.ok(after.Version.Index > v);
    await svc.remove('s');
    await rejects(svc.inspect('s'), 'NotFound', 'secret s not found');
    await rejects(svc.remove('s'), 'NotFound', 'secret s not found');
    // the name is free again
    await svc.create({ Name: 's', Data: b64('again') });
  });

  it('filters by id, name, names and label', async () => {
    const { svc } = setup('secret');
    const a = await svc.create({ Name: 'alpha', Labels: { env: 'dev' }, Data: b64('1') });
    await svc.create({ Name: 'alps', Labels: { env: 'prod', tier: 'x' }, Data: b64('2') });
    await svc.create({ Name: 'beta', Data: b64('3') });
    const names = async (f: Record<string, string[]>) =>
      (await svc.list(new Map(Object.entries(f)))).map((o) => o.Spec.Name).sort();
    assert.deepEqual(await names({}), ['alpha', 'alps', 'beta']);
    assert.deepEqual(await names({ name: ['al'] }), ['alpha', 'alps']);
    assert.deepEqual(await names({ names: ['al', 'beta'] }), ['beta']);
    assert.deepEqual(await names({ id: [a.slice(0, 6)] }), ['alpha']);
    assert.deepEqual(await names({ label: ['env'] }), ['alpha', 'alps']);
    assert.deepEqual(await names({ label: ['env=prod', 'tier'] }), ['alps']);
    await rejects(names({ bogus: ['x'] }), 'InvalidParameter', "Invalid filter 'bogus'");
  });

  it('answers what the swarm answers when this node is not a manager', async () => {
    const { svc, demote } = setup('secret');
    demote();
    await rejects(svc.list(), 'Unavailable', /not a swarm manager/);
    await rejects(svc.create({ Name: 's', Data: b64('x') }), 'Unavailable', /not a swarm manager/);
  });
});

describe('configs in the cluster store', () => {
  it('shows the data, keeps Templating, allows up to 1000 KiB, and has no names filter', async () => {
    const { store, svc } = setup('config');
    const id = await svc.create({
      Name: 'c',
      Data: b64('plain-config-text'),
      Templating: { Name: 'golang' },
    });
    const got = await svc.inspect(id);
    assert.deepEqual(got.Spec, {
      Name: 'c',
      Labels: {},
      Data: b64('plain-config-text'),
      Templating: { Name: 'golang' },
    });
    const all = (await store.range('/berth/')).kvs.map((k) => k.value).join('\n');
    assert.ok(!all.includes(b64('plain-config-text')));
    await svc.create({ Name: 'big', Data: Buffer.alloc(1000 * 1024 - 1).toString('base64') });
    await rejects(
      svc.create({ Name: 'huge', Data: Buffer.alloc(1000 * 1024).toString('base64') }),
      'InvalidParameter',
      'rpc error: code = InvalidArgument desc = config data must be larger than 0 and less than 1024000 bytes',
    );
    await rejects(svc.list(new Map([['names', ['c']]])), 'InvalidParameter', "Invalid filter 'names'");
    await rejects(svc.inspect('nope'), 'NotFound', 'config nope not found');
  });
});
