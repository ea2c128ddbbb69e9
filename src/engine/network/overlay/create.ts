import type { Logger } from '../../../common/log.js';
import { HostLinkOps } from '../adapters/iproute.ops.js';
import { EmbeddedDns } from '../dns/embedded-dns.js';
import { hostLockAt } from '../host-lock.js';
import { HostOverlayOps } from './overlay.ops.js';
import { OverlayNetworks } from './overlay-networks.js';

/** The node's overlay data plane with its real parts: iproute2, the engine's own DNS responder. */
export function createOverlayNetworks(opts: {
  execRoot: string;
  gwBridge: string;
  log: Logger;
}): OverlayNetworks {
  const log = opts.log.child('overlay');
  return new OverlayNetworks({
    engineKey: opts.execRoot,
    ops: new HostOverlayOps(),
    link: new HostLinkOps(),
    dns: new EmbeddedDns({ log }),
    log,
    hostLock: hostLockAt(),
    gwBridge: opts.gwBridge,
  });
}
