import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '../../../../../src/common/log.js';
import { newDek } from '../../../../../src/engine/swarm/seal.js';
import { ObjectService } from '../../../../../src/engine/swarm/secrets/object.service.js';
import {
  ObjectEvents,
  serviceUpdateAttributes,
} from '../../../../../src/engine/swarm/services/object-events.js';
import { ServicesService } from '../../../../../src/engine/swarm/services/services.service.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';

describe('service, secret and config events from the watch', () => {
  it('publishes create, update with moby attributes, and remove, once per change', async () => {
    const store = new MemoryStore();
    const swarm = { managerAccess: async () => ({ store, dek: newDek() }) };
    const log = new Logger('error');
    const services = new ServicesService({ swarm, log });
    const secrets = new ObjectService('secret', { swarm, log });
    const seen: string[] = [];
    const events = new ObjectEvents(
      store,
      (type, action, id, attrs) => seen.push(`${type} ${action} ${id.length} ${JSON.stringify(attrs)}`),
      log,
    );
    await events.start();
    const spec = (image: string, replicas: number) => ({
      Name: 'web',
      TaskTemplate: { ContainerSpec: { Image: image } },
      Mode: { Replicated: { Replicas: replicas } },
    });
    await services.create(spec('busybox', 1));
    const v = async () => (await services.inspect('web')).Version.Index;
    await services.update('web', await v(), spec('busybox:1', 1));
    await services.update('web', await v(), spec('busybox:1', 3));
    await services.update('web', await v(), spec('busybox:1', 3), { rollback: true });
    await secrets.create({ Name: 's', Data: 'eA==' });
    await secrets.remove('s');
    await services.remove('web');
    await sleep(20);
    events.stop();
    assert.deepEqual(seen, [
      'service create 25 {"name":"web"}',
      'service update 25 {"name":"web","image.old":"busybox","image.new":"busybox:1"}',
      'service update 25 {"name":"web","replicas.old":"1","replicas.new":"3"}',
      'service update 25 {"name":"web","replicas.old":"3","replicas.new":"1","updatestate.new":"rollback_started"}',
      'secret create 25 {"name":"s"}',
      'secret remove 25 {"name":"s"}',
      'service remove 25 {"name":"web"}',
    ]);
  });

  it('reports update state changes as moby does', () => {
    assert.deepEqual(
      serviceUpdateAttributes(
        { name: 'a', updateState: 'updating' },
        { name: 'a', updateState: 'completed' },
      ),
      {
        name: 'a',
        'updatestate.old': 'updating',
        'updatestate.new': 'completed',
      },
    );
    assert.deepEqual(serviceUpdateAttributes({ name: 'a', updateState: 'paused' }, { name: 'a' }), {
      name: 'a',
    });
  });
});
