/** The cluster's keys in etcd (docs/swarm.md): everything under one prefix, values JSON. */

export const PREFIX = '/berth/swarm/v1';

export const keys = {
  cluster: `${PREFIX}/cluster`,
  caRoot: `${PREFIX}/ca/root`,
  node: (id: string) => `${PREFIX}/nodes/${id}`,
  nodes: `${PREFIX}/nodes/`,
  live: (id: string) => `${PREFIX}/live/${id}`,
  lives: `${PREFIX}/live/`,
  manager: (id: string) => `${PREFIX}/managers/${id}`,
  managers: `${PREFIX}/managers/`,
  election: `${PREFIX}/election`,
};
