import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { keys, PREFIX } from '../keys.js';
import { networkKeys } from '../networks/network-keys.js';
import { objectKeys } from '../secrets/object-keys.js';
import type { StoredObject } from '../secrets/secrets.types.js';
import type { ClusterStore, Watch, WatchEvent } from '../store/cluster-store.js';
import type { StoredService } from './service.types.js';

/**
 * A manager's swarm-scope `service`, `secret` and `config` events, from its etcd watch (each
 * manager emits each change once, as it reaches it), with moby's attributes (daemon/events.go):
 * `name`, and on a service update `image.old/new`, `replicas.old/new` and `updatestate.old/new`
 * when they change.
 */

export type ObjectPublish = (
  type: 'service' | 'secret' | 'config' | 'network',
  action: string,
  id: string,
  attributes: Record<string, string>,
) => void;

interface ServiceSeen {
  name: string;
  image?: string;
  replicas?: number;
  updateState?: string;
}

const KINDS = [
  { type: 'service', prefix: keys.services },
  { type: 'secret', prefix: objectKeys('secret').all },
  { type: 'config', prefix: objectKeys('config').all },
  // swarm networks: create and remove (their Spec.Name, as secrets' and configs')
  { type: 'network', prefix: networkKeys.all },
] as const;

function serviceSeen(value: string): ServiceSeen {
  try {
    const s = JSON.parse(value) as StoredService;
    const seen: ServiceSeen = { name: s.Spec?.Name ?? '' };
    const image = s.Spec?.TaskTemplate?.ContainerSpec?.Image;
    if (image !== undefined) seen.image = image;
    const replicas = s.Spec?.Mode?.Replicated?.Replicas;
    if (replicas !== undefined) seen.replicas = replicas;
    if (s.UpdateStatus?.State) seen.updateState = s.UpdateStatus.State;
    return seen;
  } catch {
    return { name: '' };
  }
}

function objectName(value: string): string {
  try {
    return (JSON.parse(value) as StoredObject).Spec?.Name ?? '';
  } catch {
    return '';
  }
}

/** moby's attributes of a service update: what changed of the image, the replicas, the update state. */
export function serviceUpdateAttributes(old: ServiceSeen, now: ServiceSeen): Record<string, string> {
  const attrs: Record<string, string> = { name: now.name };
  if (old.image !== undefined && now.image !== undefined && old.image !== now.image) {
    attrs['image.old'] = old.image;
    attrs['image.new'] = now.image;
  }
  if (old.replicas !== undefined && now.replicas !== undefined && old.replicas !== now.replicas) {
    attrs['replicas.old'] = String(old.replicas);
    attrs['replicas.new'] = String(now.replicas);
  }
  if (now.updateState !== undefined) {
    if (old.updateState === undefined) attrs['updatestate.new'] = now.updateState;
    else if (old.updateState !== now.updateState) {
      attrs['updatestate.old'] = old.updateState;
      attrs['updatestate.new'] = now.updateState;
    }
  }
  return attrs;
}

export class ObjectEvents {
  private readonly services = new Map<string, ServiceSeen>();
  private readonly names = new Map<string, string>();
  private watch?: Watch;
  private stopped = false;

  constructor(
    private readonly store: ClusterStore,
    private readonly publish: ObjectPublish,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.stopped = false;
    const ranges = await Promise.all(KINDS.map((k) => this.store.range(k.prefix)));
    this.services.clear();
    this.names.clear();
    let revision = 0;
    ranges.forEach((r, i) => {
      const kind = KINDS[i];
      revision = Math.max(revision, r.revision);
      for (const kv of r.kvs) {
        if (kind?.type === 'service') this.services.set(kv.key, serviceSeen(kv.value));
        else this.names.set(kv.key, objectName(kv.value));
      }
    });
    // one watch on the cluster's prefix; keys of other kinds are passed over
    this.watch = this.store.watch(`${PREFIX}/`, revision + 1, {
      onEvents: (events) => {
        for (const e of events) this.apply(e);
      },
      onError: (err) => {
        if (this.stopped) return;
        this.log.debug('object event watch ended; starting it again', { error: errorMessage(err) });
        void sleep(500).then(() => (this.stopped ? undefined : this.start().catch(() => {})));
      },
    });
  }

  stop(): void {
    this.stopped = true;
    this.watch?.close();
    this.watch = undefined;
  }

  private apply(e: WatchEvent): void {
    const key = e.kv.key;
    const kind = KINDS.find((k) => key.startsWith(k.prefix));
    if (!kind) return;
    const id = key.slice(kind.prefix.length);
    if (kind.type === 'service') {
      const old = this.services.get(key);
      if (e.type === 'delete') {
        this.services.delete(key);
        this.publish('service', 'remove', id, { name: old?.name ?? '' });
        return;
      }
      const now = serviceSeen(e.kv.value);
      this.services.set(key, now);
      if (!old) this.publish('service', 'create', id, { name: now.name });
      else this.publish('service', 'update', id, serviceUpdateAttributes(old, now));
      return;
    }
    if (e.type === 'delete') {
      const name = this.names.get(key) ?? '';
      this.names.delete(key);
      this.publish(kind.type, 'remove', id, { name });
      return;
    }
    const existed = this.names.has(key);
    const name = objectName(e.kv.value);
    this.names.set(key, name);
    this.publish(kind.type, existed ? 'update' : 'create', id, { name });
  }
}
