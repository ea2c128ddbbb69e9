import type { Logger } from '../../../common/log.js';
import type { LogChunk } from '../../containers/io/io.types.js';
import { detailsPrefix, fixedNano } from '../../containers/io/logs.js';
import type { Task } from '../tasks/task.types.js';
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
    return this.stream(tasks, q);
  }

  async task(ref: string, q: SwarmLogsQuery): Promise<SwarmLogStream> {
    return this.stream([await this.deps.tasks.inspect(ref)], q);
  }

  private async stream(tasks: Task[], q: SwarmLogsQuery): Promise<SwarmLogStream> {
    const broker = await this.deps.broker();
    const plan = new Map<string, string[]>();
    const serviceOf = new Map<string, string>();
    for (const t of tasks) {
      serviceOf.set(t.ID, t.ServiceID);
      if (!t.NodeID) continue;
      plan.set(t.NodeID, [...(plan.get(t.NodeID) ?? []), t.ID]);
    }
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
    void broker
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
      })
      .finally(() => queue.end());
    return { tty, batches: queue };
  }
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
