/** The cluster's keys in etcd (docs/swarm.md): everything under one prefix, values JSON. */

export const PREFIX = '/berth/swarm/v1';

export const keys = {
  cluster: `${PREFIX}/cluster`,
  caRoot: `${PREFIX}/ca/root`,
  /** The root a rotation goes to, while it runs (`swarm ca --rotate`). */
  caNext: `${PREFIX}/ca/next`,
  node: (id: string) => `${PREFIX}/nodes/${id}`,
  nodes: `${PREFIX}/nodes/`,
  live: (id: string) => `${PREFIX}/live/${id}`,
  lives: `${PREFIX}/live/`,
  manager: (id: string) => `${PREFIX}/managers/${id}`,
  managers: `${PREFIX}/managers/`,
  election: `${PREFIX}/election`,
  service: (id: string) => `${PREFIX}/services/${id}`,
  services: `${PREFIX}/services/`,
  task: (id: string) => `${PREFIX}/tasks/${id}`,
  tasks: `${PREFIX}/tasks/`,
  /** A name's claim, created in the same txn as its object with create_revision == 0. */
  name: (kind: 'services' | 'secrets' | 'configs' | 'networks', name: string) =>
    `${PREFIX}/names/${kind}/${name}`,
};
