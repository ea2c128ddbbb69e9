import { randomBytes } from 'node:crypto';
import { forbidden } from '../../../common/errors.js';
import type { LogRelay, RelayTarget } from './log-relay.js';
import type { AgentLogLine, LogPublishAnswer, LogPublishCall, LogSubscription } from './logs.types.js';

/**
 * A manager's log broker: which nodes have their assignments stream on this manager (to carry
 * subscriptions to them), and the subscriptions open here (the lines the nodes POST back go to
 * the request that opened it). A subscription ends when its client leaves, or, not following,
 * when every node has said it is done (or went silent for `silenceMs`, or lost its stream).
 * Nodes whose stream is on another manager are reached through etcd (log-relay.ts).
 */

/** What the broker puts in a node's assignments stream. */
export type LogStreamMessage =
  | { type: 'logs'; subscription: LogSubscription }
  | { type: 'logs-end'; ID: string };

export type LogOptions = Omit<LogSubscription, 'ID' | 'Tasks' | 'Manager'>;

interface NodePart {
  done: boolean;
  lastWord: number;
}

interface Subscription {
  follow: boolean;
  nodes: Map<string, NodePart>;
  onLines: (nodeId: string, lines: AgentLogLine[]) => void;
  onError: (nodeId: string, message: string) => void;
  check: () => void;
}

export class LogBroker implements RelayTarget {
  private readonly streams = new Map<string, (m: LogStreamMessage) => void>();
  private readonly subs = new Map<string, Subscription>();
  private relay?: LogRelay;

  constructor(
    private readonly silenceMs = 15_000,
    private readonly newId: () => string = () => randomBytes(16).toString('hex'),
  ) {}

  /** A node's assignments stream on this manager; the function returned ends it. */
  attach(nodeId: string, send: (m: LogStreamMessage) => void): () => void {
    this.streams.set(nodeId, send);
    this.relay?.attached(nodeId);
    return () => {
      if (this.streams.get(nodeId) !== send) return;
      this.streams.delete(nodeId);
      // what that node would have sent will not come through this stream any more
      for (const sub of this.subs.values()) {
        const part = sub.nodes.get(nodeId);
        if (part && !part.done) {
          part.done = true;
          sub.check();
        }
      }
    };
  }

  connected(nodeId: string): boolean {
    return this.streams.has(nodeId);
  }

  /** Subscriptions reach the nodes of the other managers through etcd (log-relay.ts) from now on. */
  useRelay(relay: LogRelay): void {
    this.relay?.stop();
    this.relay = relay;
    relay.start(this);
  }

  stopRelay(): void {
    this.relay?.stop();
    this.relay = undefined;
  }

  offer(nodeId: string, sub: LogSubscription): boolean {
    const send = this.streams.get(nodeId);
    send?.({ type: 'logs', subscription: sub });
    return send !== undefined;
  }

  end(nodeId: string, id: string): void {
    this.streams.get(nodeId)?.({ type: 'logs-end', ID: id });
  }

  /**
   * Subscribes to the logs of `plan`'s tasks (node → task IDs) on the nodes whose stream is here;
   * the lines go to `onLines` as they come. Resolves with the nodes that could not be asked once
   * the subscription is over: `signal` aborted, or not following and every node done.
   */
  async subscribe(
    plan: Map<string, string[]>,
    options: LogOptions,
    onLines: (nodeId: string, lines: AgentLogLine[]) => void,
    onError: (nodeId: string, message: string) => void,
    signal: AbortSignal,
  ): Promise<{ unreachable: string[] }> {
    const id = this.newId();
    const unreachable: string[] = [];
    const nodes = new Map<string, NodePart>();
    const remote: Record<string, string[]> = {};
    const relay = this.relay;
    for (const [nodeId, tasks] of plan) {
      if (this.streams.has(nodeId)) nodes.set(nodeId, { done: false, lastWord: Date.now() });
      else if (relay && (await relay.alive(nodeId).catch(() => false))) {
        nodes.set(nodeId, { done: false, lastWord: Date.now() });
        remote[nodeId] = tasks;
      } else unreachable.push(nodeId);
    }
    let withdraw: (() => Promise<void>) | undefined;
    await new Promise<void>((resolve) => {
      let over = false;
      const finish = () => {
        if (over) return;
        over = true;
        clearInterval(silence);
        signal.removeEventListener('abort', finish);
        this.subs.delete(id);
        for (const nodeId of nodes.keys()) this.end(nodeId, id);
        resolve();
      };
      const check = () => {
        if (!options.Follow && [...nodes.values()].every((p) => p.done)) finish();
      };
      const silence = setInterval(
        () => {
          if (options.Follow) return;
          const now = Date.now();
          for (const part of nodes.values()) if (now - part.lastWord > this.silenceMs) part.done = true;
          check();
        },
        Math.min(1000, this.silenceMs),
      );
      silence.unref();
      this.subs.set(id, { follow: options.Follow, nodes, onLines, onError, check });
      if (signal.aborted) return finish();
      signal.addEventListener('abort', finish, { once: true });
      for (const [nodeId, part] of nodes) {
        if (remote[nodeId]) continue;
        if (!this.offer(nodeId, { ID: id, Tasks: plan.get(nodeId) ?? [], ...options })) part.done = true;
      }
      if (relay && Object.keys(remote).length > 0) {
        relay
          .publish(id, { Manager: relay.addr, Plan: remote, Options: options })
          .then((w) => {
            if (over) void w();
            else withdraw = w;
          })
          .catch(() => {
            // the other managers' nodes cannot be asked: they are not waited for
            for (const nodeId of Object.keys(remote)) {
              const part = nodes.get(nodeId);
              if (part) part.done = true;
              unreachable.push(nodeId);
            }
            check();
          });
      }
      check();
    });
    await withdraw?.();
    return { unreachable };
  }

  /** A node's batch for a subscription (only one the node was asked for). */
  publish(nodeId: string, subscriptionId: string, call: LogPublishCall): LogPublishAnswer {
    const sub = this.subs.get(subscriptionId);
    if (!sub) return { Active: false };
    const part = sub.nodes.get(nodeId);
    if (!part) throw forbidden(`node ${nodeId} was not asked for the logs of subscription ${subscriptionId}`);
    if (part.done) return { Active: false };
    part.lastWord = Date.now();
    if (call.Lines.length > 0) sub.onLines(nodeId, call.Lines);
    for (const e of call.Errors ?? []) sub.onError(nodeId, e);
    if (call.Done) {
      part.done = true;
      sub.check();
      return { Active: false };
    }
    return { Active: this.subs.has(subscriptionId) };
  }
}
