import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { LogChunk } from '../../containers/io/io.types.js';
import { detailsPrefix, fixedNano } from '../../containers/io/logs.js';
import { stateRank, type Task } from '../tasks/task.types.js';
import type { LogBroker, LogOptions } from './log-broker.js';
import type { AgentLogLine } from './logs.types.js';

/**
 * `GET /services/{id}/logs` and `GET /tasks/{id}/logs` on a manager: the tasks' nodes are asked
 * through the log broker, and what they send back comes out as `docker logs` chunks, each line
 * with its timestamp and, with `details`, its attributes plus the swarm context
 * (`com.docker.swarm.node.id`, `.service.id`, `.task.id`), as dockerd's ServiceLogs writes them.
 */

export interface SwarmLogsQuery {
  stdout: boolean;
  stderr: boolean;
  /** Unix nanoseconds. */
  since?: bigint;
  tail?: number;
  timestamps: boolean;
  follow: boolean;
  details: boolean;
  signal: AbortSignal;
}

/** What the logs need of the swarm: its tasks (tasks.service.ts) and this manager's broker. */
export interface SwarmLogsDeps {
  tasks: {
    list(filters: Map<string, string[]>): Promise<Task[]>;
    inspect(ref: string): Promise<Task>;
  };
  broker(): Promise<LogBroker>;
  log: Logger;
  /** How often a followed service's tasks are listed for new ones (default 1 s). */
  followPollMs?: number;
}

/** A line of a task's stdout or stderr, or (`system`) an error dockerd writes as "Error grabbing logs". */
export interface SwarmLogChunk {
  stream: LogChunk['stream'] | 'system';
  data: Buffer;
}

export interface SwarmLogStream {
  tty: boolean;
  batches: AsyncIterable<SwarmLogChunk[]>;
}

export class SwarmLogs {
  constructor(private readonly deps: SwarmLogsDeps) {}

  /** Throws dockerd's answer on a node that is not a manager. */
  async ready(): Promise<void> {
    await this.deps.broker();
  }

  async service(ref: string, q: SwarmLogsQuery): Promise<SwarmLogStream> {
    const tasks = await this.deps.tasks.list(new Map([['service', [ref]]]));
    return this.stream(tasks, q, ref);
  }

  async task(ref: string, q: SwarmLogsQuery): Promise<SwarmLogStream> {
    return this.stream([await this.deps.tasks.inspect(ref)], q);
  }

  /**
   * The tasks' logs; following a service (`serviceRef`), the tasks that get a container later
   * (a replacement, a scale-up) join the same stream, as swarmkit's broker adds them: the service's
   * tasks are listed every `followPollMs`, and each new one is subscribed to on its node.
   */
  private async stream(tasks: Task[], q: SwarmLogsQuery, serviceRef?: string): Promise<SwarmLogStream> {
    const broker = await this.deps.broker();
    const serviceOf = new Map<string, string>();
    const tty = tasks.some((t) => t.Spec.ContainerSpec?.TTY === true);
    const options: LogOptions = {
      Follow: q.follow,
      Stdout: q.stdout,
      Stderr: q.stderr,
      ...(q.tail !== undefined ? { Tail: q.tail } : {}),
      ...(q.since !== undefined ? { Since: q.since.toString() } : {}),
    };
    const format = (nodeId: string, l: AgentLogLine): LogChunk => {
      let prefix = '';
      if (q.details) {
        prefix = detailsPrefix({
          ...(l.Attrs ?? {}),
          'com.docker.swarm.node.id': nodeId,
          'com.docker.swarm.service.id': serviceOf.get(l.Task) ?? '',
          'com.docker.swarm.task.id': l.Task,
        });
      }
      if (q.timestamps) prefix = `${fixedNano(l.Time)} ${prefix}`;
      const data = Buffer.from(l.Data, 'base64');
      return { stream: l.Stream, data: prefix ? Buffer.concat([Buffer.from(prefix), data]) : data };
    };
    const queue = new BatchQueue();
    const error = (message: string) =>
      queue.push([{ stream: 'system', data: Buffer.from(`Error grabbing logs: ${message}\n`) }]);
    const subscribed = new Set<string>();
    /** One subscription to these tasks on their nodes; settles when it is over. */
    const open = (some: Task[]): Promise<void> => {
      const plan = new Map<string, string[]>();
      for (const t of some) {
        subscribed.add(t.ID);
        serviceOf.set(t.ID, t.ServiceID);
        if (!t.NodeID) continue;
        plan.set(t.NodeID, [...(plan.get(t.NodeID) ?? []), t.ID]);
      }
      return broker
        .subscribe(
          plan,
          options,
          (nodeId, lines) => queue.push(lines.map((l) => format(nodeId, l))),
          (nodeId, message) => {
            this.deps.log.warn('a node could not read task logs', { nodeId, error: message });
            error(message);
          },
          q.signal,
        )
        .then(({ unreachable }) => {
          if (unreachable.length > 0) {
            error(
              `warning: incomplete log stream. some logs could not be retrieved for the following reasons: ${unreachable
                .map((n) => `node ${n} is not available`)
                .join(', ')}`,
            );
          }
        });
    };
    if (!q.follow || serviceRef === undefined) {
      void open(tasks).finally(() => queue.end());
      return { tty, batches: queue };
    }
    // following: a task joins once it has a container to read (one without yet joins later)
    const open1 = open(tasks.filter(hasContainer));
    void this.followNewTasks(serviceRef, subscribed, open, q.signal)
      .then((more) => Promise.allSettled([open1, ...more]))
      .finally(() => queue.end());
    return { tty, batches: queue };
  }

  /** Until `signal`: the service's tasks with a container not yet subscribed to, subscribed to. */
  private async followNewTasks(
    serviceRef: string,
    subscribed: Set<string>,
    open: (tasks: Task[]) => Promise<void>,
    signal: AbortSignal,
  ): Promise<Promise<void>[]> {
    const opened: Promise<void>[] = [];
    const every = this.deps.followPollMs ?? FOLLOW_POLL_MS;
    while (!signal.aborted) {
      await sleep(every, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) break;
      let tasks: Task[];
      try {
        tasks = await this.deps.tasks.list(new Map([['service', [serviceRef]]]));
      } catch (err) {
        // the service gone, or the store unreachable for a moment: what runs goes on
        this.deps.log.debug('cannot list the followed service’s tasks', {
          service: serviceRef,
          error: errorMessage(err),
        });
        continue;
      }
      const fresh = tasks.filter((t) => !subscribed.has(t.ID) && hasContainer(t));
      if (fresh.length > 0 && !signal.aborted) opened.push(open(fresh).catch(() => undefined));
    }
    return opened;
  }
}

/** How often a followed service's tasks are listed for new ones. */
const FOLLOW_POLL_MS = 1000;

/** A task whose container exists on its node (it got as far as starting). */
function hasContainer(t: Task): boolean {
  return (
    Boolean(t.NodeID && t.Status.ContainerStatus?.ContainerID) &&
    stateRank(t.Status.State) >= stateRank('starting')
  );
}

/** Batches pushed by callbacks, taken by one async reader. */
class BatchQueue implements AsyncIterable<SwarmLogChunk[]> {
  private items: SwarmLogChunk[][] = [];
  private ended = false;
  private wake?: () => void;

  push(batch: SwarmLogChunk[]): void {
    if (this.ended || batch.length === 0) return;
    this.items.push(batch);
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SwarmLogChunk[]> {
    for (;;) {
      const batch = this.items.shift();
      if (batch) {
        yield batch;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
  }
}
