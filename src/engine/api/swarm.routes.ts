import { BerthError, notImplemented } from '../../common/errors.js';
import type { ApiContext, ApiRouter } from './context.js';
import { gates, versionAtLeast } from './versions.js';

/**
 * Swarm mode's endpoints while the engine is not in a swarm (swarm mode is not there yet): what
 * dockerd answers outside a swarm, so that clients tell "no swarm" from "no such endpoint" (their
 * clean-ups leave a swarm and ignore exactly this): 503 with dockerd's words, 406 before API 1.25
 * (docker 1.12, the code the 1.24 documentation gives). Joining or making a swarm is refused
 * as not implemented.
 */

const NOT_A_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
const NOT_IN_SWARM = 'This node is not part of a swarm';

function noSwarm(ctx: ApiContext, message: string): BerthError {
  return new BerthError(
    versionAtLeast(ctx.version, gates.swarmUnavailable) ? 'Unavailable' : 'NotAcceptable',
    message,
  );
}

export function registerSwarmRoutes(router: ApiRouter): void {
  const manager = (ctx: ApiContext) => {
    throw noSwarm(ctx, NOT_A_MANAGER);
  };
  router.get('/swarm', manager);
  router.post('/swarm/update', manager);
  router.get('/swarm/unlockkey', manager);
  router.post('/swarm/unlock', manager);
  router.post('/swarm/leave', (ctx) => {
    throw noSwarm(ctx, NOT_IN_SWARM);
  });
  const unsupported = () => {
    throw notImplemented('swarm mode is not supported by this engine yet');
  };
  router.post('/swarm/init', unsupported);
  router.post('/swarm/join', unsupported);
  for (const kind of ['nodes', 'services', 'tasks', 'secrets', 'configs']) {
    router.get(`/${kind}`, manager);
    router.add(['GET', 'DELETE'], `/${kind}/{id}`, manager);
    router.post(`/${kind}/{id}/update`, manager);
  }
  for (const kind of ['services', 'secrets', 'configs']) router.post(`/${kind}/create`, manager);
  for (const kind of ['services', 'tasks']) router.get(`/${kind}/{id}/logs`, manager);
}
