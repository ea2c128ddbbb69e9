import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { clusterCall } from './cluster-api/client.js';
import type { HeartbeatAnswer, ManagerAddress } from './cluster-api/protocol.js';

/**
 * A worker's link to the managers: a heartbeat every period to one of them over mutual TLS,
 * moving on to the next in the list when one does not answer. The managers' answers refresh the
 * list and the period, and carry the node's role (a promotion shows there first).
 */
export class WorkerLink {
  private timer?: NodeJS.Timeout;
  private current = 0;
  private stopped = false;

  constructor(
    private managers: ManagerAddress[],
    private periodMs: number,
    private tls: { ca: string; cert: string; key: string },
    private readonly log: Logger,
    private readonly onAnswer: (answer: HeartbeatAnswer) => void,
  ) {}

  /** The managers as last heard. */
  get addresses(): ManagerAddress[] {
    return this.managers;
  }

  /** A renewed certificate and key, from the next heartbeat on. */
  useTls(tls: { ca: string; cert: string; key: string }): void {
    this.tls = tls;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.beat(), ms);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    const manager = this.managers[this.current % Math.max(1, this.managers.length)];
    if (!manager) return this.schedule(this.periodMs);
    try {
      const answer = await clusterCall<HeartbeatAnswer>(manager.Addr, 'POST', '/v1/heartbeat', {}, this.tls);
      this.periodMs = answer.HeartbeatPeriodMs;
      if (answer.Managers.length > 0) this.managers = answer.Managers;
      this.onAnswer(answer);
    } catch (err) {
      this.log.debug('heartbeat failed; trying the next manager', {
        manager: manager.Addr,
        error: errorMessage(err),
      });
      this.current++;
    }
    this.schedule(this.periodMs);
  }
}
