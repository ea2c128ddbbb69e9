import { PREFIX } from '../keys.js';
import type { ObjectKind } from './secrets.types.js';

/** Where secrets and configs live in etcd (docs/swarm.md): the object, and its name's claim. */
export const objectKeys = (kind: ObjectKind) => ({
  all: `${PREFIX}/${kind}s/`,
  object: (id: string) => `${PREFIX}/${kind}s/${id}`,
  name: (name: string) => `${PREFIX}/names/${kind}s/${name}`,
});
