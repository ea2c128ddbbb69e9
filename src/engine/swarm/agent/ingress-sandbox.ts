import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { IngressMesh } from '../../network/lb/lb.types.js';
import { INGRESS_SANDBOX_ID, type NodeIngressState } from '../../network/overlay/overlay.types.js';
import type { OverlayPort } from './overlay-port.js';

/** The overlay's name for the ingress sandbox's attachment (never a task ID: those are base 36). */
export const INGRESS_SANDBOX = INGRESS_SANDBOX_ID;

/**
 * The node's end of the routing mesh, from the managers' picture: while some service publishes a
 * port through the mesh, the mesh's sandbox is attached to `ingress` with the node's own address
 * there (no gateway bridge, no default route: its way out is its link to the host) and given the
 * ports with their backends; when none is left, detached and removed. Changes run one at a time.
 * The first picture after the agent starts settles what an engine killed with SIGKILL left: a
 * sandbox no port needs any more is removed then too (its namespace, host link, rules, mount).
 */
export class IngressSandbox {
  private attached?: { netns: string; address: string };
  /** No picture has come since the agent started: a sandbox may be left by the last engine. */
  private unsettled = true;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly overlay: OverlayPort,
    private readonly mesh: IngressMesh,
    private readonly log: Logger,
  ) {}

  sync(want: NodeIngressState | undefined): Promise<void> {
    return this.serial(async () => {
      const first = this.unsettled;
      this.unsettled = false;
      if (!want || want.ports.length === 0) {
        if (this.attached || first) await this.drop();
        return;
      }
      const { sandboxKey } = await this.mesh.ensureSandbox();
      const had = this.attached;
      if (
        !had ||
        had.netns !== sandboxKey ||
        had.address !== want.address ||
        !this.overlay.attached(INGRESS_SANDBOX)
      ) {
        if (had || this.overlay.attached(INGRESS_SANDBOX)) await this.overlay.detach(INGRESS_SANDBOX);
        this.attached = undefined;
        try {
          await this.overlay.attach({
            taskId: INGRESS_SANDBOX,
            netns: sandboxKey,
            attachments: [{ networkId: want.networkId, address: want.address }],
            gateway: false,
          });
        } catch (err) {
          await this.overlay.detach(INGRESS_SANDBOX).catch(() => undefined);
          throw err;
        }
        this.attached = { netns: sandboxKey, address: want.address };
      }
      await this.mesh.apply(want.ports.map((p) => ({ ...p, backends: [...p.backends] })));
    }).catch((err: unknown) => this.log.warn('cannot set up the routing mesh', { error: errorMessage(err) }));
  }

  /** The node leaves: the sandbox and its rules go. */
  leave(): Promise<void> {
    return this.serial(() => this.drop());
  }

  private async drop(): Promise<void> {
    this.attached = undefined;
    await this.overlay.detach(INGRESS_SANDBOX);
    await this.mesh.remove();
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
