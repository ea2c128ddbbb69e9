import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../../../../src/common/errors.js';
import { Logger } from '../../../../../src/common/log.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import { newDek } from '../../../../../src/engine/swarm/seal.js';
import { ObjectService } from '../../../../../src/engine/swarm/secrets/object.service.js';
import type { ServiceSpec, StoredService } from '../../../../../src/engine/swarm/services/service.types.js';
import { ServicesService } from '../../../../../src/engine/swarm/services/services.service.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';

function setup() {
  const store = new MemoryStore();
  const dek = newDek();
  const swarm = { managerAccess: async () => ({ store, dek }) };
  const log = new Logger('error');
  const networks = { find: (ref: string) => (ref === 'mynet' ? { name: 'mynet' } : undefined) };
  const services = new ServicesService({ swarm, log, networks, now: () => new Date(1e12) });
  const secrets = new ObjectService('secret', { swarm, log });
  return { store, services, secrets };
}

const spec = (name: string, extra: ServiceSpec = {}): ServiceSpec => ({
  Name: name,
  TaskTemplate: { ContainerSpec: { Image: 'busybox' } },
  ...extra,
});

async function rejects(p: Promise<unknown>, kind: string, message: string | RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof BerthError, String(err));
    assert.equal(err.kind, kind);
    if (typeof message === 'string') assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  });
}

async function stored(store: MemoryStore, id: string): Promise<StoredService> {
  const kv = await store.get(keys.service(id));
  assert.ok(kv);
  return JSON.parse(kv.value) as StoredService;
}

describe('services in the cluster store', () => {
  it('claims the name in the create txn: a second create of the name is 409, a removed one frees it', async () => {
    const { store, services } = setup();
    const { ID } = await services.create(spec('web'));
    assert.equal((await store.get(keys.name('services', 'web')))?.value, ID);
    await rejects(
      services.create(spec('web')),
      'Conflict',
      'rpc error: code = AlreadyExists desc = name conflicts with an existing object: service web already exists',
    );
    const both = await Promise.allSettled([services.create(spec('race')), services.create(spec('race'))]);
    assert.equal(both.filter((r) => r.status === 'fulfilled').length, 1);
    await services.remove('web');
    assert.equal(await store.get(keys.name('services', 'web')), undefined);
    await services.create(spec('web'));
  });

  it('updates by compare-and-swap on the mod revision, keeps PreviousSpec and rolls back', async () => {
    const { store, services } = setup();
    const { ID } = await services.create(spec('web', { Labels: { a: '1' } }));
    const v1 = (await services.inspect('web')).Version.Index;
    await rejects(services.update('web', v1 + 5, spec('web')), 'Conflict', /update out of sequence$/);
    await services.update(ID, v1, spec('web', { Labels: { a: '2' }, Mode: { Replicated: { Replicas: 4 } } }));
    let s = await stored(store, ID);
    assert.equal(s._.specVersion, 1, 'labels and replicas alone replace no task');
    assert.deepEqual(s.PreviousSpec?.Labels, { a: '1' });
    const v2 = (await services.inspect('web')).Version.Index;
    await services.update(
      'web',
      v2,
      spec('web', { TaskTemplate: { ContainerSpec: { Image: 'busybox:1' } } }),
    );
    s = await stored(store, ID);
    assert.equal(s._.specVersion, 2);
    const v3 = (await services.inspect('web')).Version.Index;
    // the stale v2 cannot win any more
    await rejects(services.update('web', v2, spec('web')), 'Conflict', /update out of sequence$/);
    await services.update('web', v3, spec('web'), { rollback: true });
    s = await stored(store, ID);
    assert.equal(s.Spec.TaskTemplate?.ContainerSpec?.Image, 'busybox');
    assert.equal(s.PreviousSpec?.TaskTemplate?.ContainerSpec?.Image, 'busybox:1');
    assert.deepEqual(
      { State: s.UpdateStatus?.State, Message: s.UpdateStatus?.Message },
      { State: 'rollback_started', Message: 'manually requested rollback' },
    );
    assert.equal(s._.specVersion, 3);
    const v4 = (await services.inspect('web')).Version.Index;
    await rejects(
      services.update('web', v4, spec('web', { Mode: { Global: {} } })),
      'InvalidParameter',
      'rpc error: code = Unimplemented desc = service mode change is not allowed',
    );
  });

  it('claims ingress ports, assigns 30000 up for PublishedPort 0 and keeps them across updates', async () => {
    const { store, services } = setup();
    const ports = (p: number) => ({ EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: p }] } });
    const a = await services.create(spec('a', ports(0)));
    const b = await services.create(spec('b', ports(0)));
    assert.equal((await services.inspect('a')).Endpoint.Ports?.[0]?.PublishedPort, 30000);
    assert.equal((await services.inspect('b')).Endpoint.Ports?.[0]?.PublishedPort, 30001);
    assert.equal((await store.get(`${keys.cluster.replace('cluster', 'ports')}/tcp/30000`))?.value, a.ID);
    await rejects(
      services.create(spec('c', ports(30001))),
      'InvalidParameter',
      `rpc error: code = InvalidArgument desc = port '30001' is already in use by service 'b' (${b.ID}) as an ingress port`,
    );
    // an update keeps a's dynamic port; a new fixed port frees the old claim
    const va = (await services.inspect('a')).Version.Index;
    await services.update('a', va, spec('a', { Labels: { x: 'y' }, ...ports(0) }));
    assert.equal((await services.inspect('a')).Endpoint.Ports?.[0]?.PublishedPort, 30000);
    const va2 = (await services.inspect('a')).Version.Index;
    await services.update('a', va2, spec('a', ports(8080)));
    assert.equal(await store.get(`${keys.cluster.replace('cluster', 'ports')}/tcp/30000`), undefined);
    await services.create(spec('c', ports(30000)));
    await services.remove('a');
    assert.equal(await store.get(`${keys.cluster.replace('cluster', 'ports')}/tcp/8080`), undefined);
    // host-mode ports are not claimed, but may not take another service's ingress port
    await rejects(
      services.create(
        spec('h', {
          EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 30001, PublishMode: 'host' }] },
        }),
      ),
      'InvalidParameter',
      /port '30001' is already in use by service 'b' .* as an ingress port$/,
    );
  });

  it('resolves secrets by name, refuses unknown ones, and keeps a used secret from removal', async () => {
    const { services, secrets } = setup();
    const sid = await secrets.create({ Name: 's1', Data: Buffer.from('x').toString('base64') });
    const ref = { SecretName: 's1', File: { Name: 's1', UID: '0', GID: '0', Mode: 0o444 } };
    await services.create(
      spec('web', { TaskTemplate: { ContainerSpec: { Image: 'busybox', Secrets: [ref] } } }),
    );
    const got = await services.inspect('web');
    assert.equal(got.Spec.TaskTemplate?.ContainerSpec?.Secrets?.[0]?.SecretID, sid);
    await rejects(
      secrets.remove('s1'),
      'InvalidParameter',
      "rpc error: code = InvalidArgument desc = secret 's1' is in use by the following service: web",
    );
    await services.create(
      spec('web2', { TaskTemplate: { ContainerSpec: { Image: 'busybox', Secrets: [ref] } } }),
    );
    await rejects(
      secrets.remove('s1'),
      'InvalidParameter',
      /is in use by the following services: (web, web2|web2, web)$/,
    );
    await rejects(
      services.create(
        spec('bad', {
          TaskTemplate: {
            ContainerSpec: { Image: 'busybox', Secrets: [{ ...ref, SecretID: 'nope', SecretName: 'x' }] },
          },
        }),
      ),
      'InvalidParameter',
      'rpc error: code = InvalidArgument desc = secret not found: x',
    );
    await services.remove('web');
    await services.remove('web2');
    await secrets.remove('s1');
  });

  it('refuses local networks (403) and unknown ones (404), and stores a swarm network by ID', async () => {
    const { store, services } = setup();
    const net = (target: string) =>
      spec('n', { TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Networks: [{ Target: target }] } });
    await rejects(
      services.create(net('mynet')),
      'Forbidden',
      /^The network mynet cannot be used with services\./,
    );
    await rejects(services.create(net('other')), 'NotFound', 'network other not found');
    const prefix = keys.cluster.replace('cluster', '');
    await store.put(
      `${prefix}networks/netid0000000000000000000001`,
      JSON.stringify({ ID: 'netid0000000000000000000001', Spec: { Name: 'ov' } }),
    );
    await store.put(keys.name('networks', 'ov'), 'netid0000000000000000000001');
    await services.create(net('ov'));
    assert.deepEqual((await services.inspect('n')).Spec.TaskTemplate?.Networks, [
      { Target: 'netid0000000000000000000001' },
    ]);
  });

  it('counts ServiceStatus from the tasks, jobs by their iteration', async () => {
    const { store, services } = setup();
    const { ID } = await services.create(spec('web', { Mode: { Replicated: { Replicas: 3 } } }));
    const put = (id: string, state: string, desired = 'running') =>
      store.put(
        keys.task(id),
        JSON.stringify({
          ID: id,
          ServiceID: ID,
          Status: { State: state },
          DesiredState: desired,
          _: { specVersion: 1, serviceName: 'web' },
        }),
      );
    await put('t1', 'running');
    await put('t2', 'running');
    await put('t3', 'failed', 'shutdown');
    const [web] = await services.list(new Map([['name', ['web']]]), true);
    assert.deepEqual(web?.ServiceStatus, { RunningTasks: 2, DesiredTasks: 3, CompletedTasks: 0 });
    const [plain] = await services.list(new Map([['name', ['web']]]), false);
    assert.equal(plain?.ServiceStatus, undefined);
  });

  it('never removes a secret that a service came to use while the removal looked', async () => {
    const store = new MemoryStore();
    const dek = newDek();
    let hook: (() => Promise<void>) | undefined;
    // a store whose first read of the services lets a service be created right after it
    const range = async (prefix: string) => {
      const r = await store.range(prefix);
      const h = hook;
      if (prefix === keys.services && h) {
        hook = undefined;
        await h();
      }
      return r;
    };
    const racy = new Proxy(store, {
      get(target, prop) {
        if (prop === 'range') return range;
        const v = Reflect.get(target, prop);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const log = new Logger('error');
    const services = new ServicesService({ swarm: { managerAccess: async () => ({ store, dek }) }, log });
    const secrets = new ObjectService('secret', {
      swarm: { managerAccess: async () => ({ store: racy, dek }) },
      log,
    });
    await secrets.create({ Name: 's1', Data: Buffer.from('x').toString('base64') });
    hook = async () => {
      await services.create(
        spec('late', {
          TaskTemplate: {
            ContainerSpec: { Image: 'busybox', Secrets: [{ SecretName: 's1', File: { Name: 's1' } }] },
          },
        }),
      );
    };
    await rejects(
      secrets.remove('s1'),
      'InvalidParameter',
      /secret 's1' is in use by the following service: late$/,
    );
    await services.remove('late');
    await secrets.remove('s1');
    assert.equal((await store.range(keys.cluster.replace('cluster', 'uses/'))).kvs.length, 0);
  });
});
