import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { LogRecord } from '../../containers/io/io.types.js';
import type { ContainerService } from '../../containers/service.types.js';
import type { AgentLogLine, LogPublishAnswer, LogPublishCall, LogSubscription } from '../logs/logs.types.js';

/**
 * The agent's side of service logs: for a subscription from its manager, the logs of the named
 * tasks' containers on this node, read through the engine's containers backend (what `docker
 * logs` reads), go back in batches (`POST /v1/logs/<id>`), one at a time, the last marked Done.
 * It stops when the manager says the subscription is over (an answer, or `logs-end`).
 */

export type AgentLogContainers = Pick<ContainerService, 'logs' | 'list'>;

export interface LogPublisherDeps {
  containers: AgentLogContainers;
  /** Sends a batch to the manager the subscription came from. */
  post(addr: string, subscriptionId: string, call: LogPublishCall): Promise<LogPublishAnswer>;
  log: Logger;
}

const TASK_LABEL = 'com.docker.swarm.task.id';
/** A batch goes once this much is waiting (bytes of line data), else after FLUSH_MS. */
const BATCH_BYTES = 96 * 1024;
const FLUSH_MS = 25;

export class LogPublisher {
  private readonly active = new Map<string, AbortController>();

  constructor(private readonly deps: LogPublisherDeps) {}

  start(addr: string, sub: LogSubscription): void {
    if (this.active.has(sub.ID)) return;
    const ac = new AbortController();
    this.active.set(sub.ID, ac);
    void this.run(addr, sub, ac)
      .catch((err: unknown) =>
        this.deps.log.debug('log subscription ended', { subscription: sub.ID, error: errorMessage(err) }),
      )
      .finally(() => {
        ac.abort();
        this.active.delete(sub.ID);
      });
  }

  end(id: string): void {
    this.active.get(id)?.abort();
  }

  stopAll(): void {
    for (const ac of this.active.values()) ac.abort();
  }

  private async run(addr: string, sub: LogSubscription, ac: AbortController): Promise<void> {
    let pending: AgentLogLine[] = [];
    let pendingBytes = 0;
    const errors: string[] = [];
    let sending = Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const flush = (done = false): Promise<void> => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      const lines = pending;
      const errs = errors.splice(0);
      pending = [];
      pendingBytes = 0;
      sending = sending.then(async () => {
        if (ac.signal.aborted && !done) return;
        if (!done && lines.length === 0 && errs.length === 0) return;
        const answer = await this.deps.post(sub.Manager ?? addr, sub.ID, {
          Lines: lines,
          ...(errs.length > 0 ? { Errors: errs } : {}),
          ...(done ? { Done: true } : {}),
        });
        if (!answer.Active) ac.abort();
      });
      sending = sending.catch((err: unknown) => {
        this.deps.log.debug('cannot send task logs', { subscription: sub.ID, error: errorMessage(err) });
        ac.abort();
      });
      return sending;
    };
    const add = (task: string, records: LogRecord[]) => {
      for (const r of records) {
        const data = Buffer.from(r.Line, 'utf8');
        pending.push({
          Task: task,
          Stream: r.Source,
          Time: r.Timestamp,
          Data: data.toString('base64'),
          ...(r.Attrs ? { Attrs: Object.fromEntries(r.Attrs.map((a) => [a.Key, a.Value])) } : {}),
        });
        pendingBytes += data.length + 160;
        if (pendingBytes >= BATCH_BYTES) void flush();
      }
      if (pending.length > 0 && !timer) {
        timer = setTimeout(() => void flush(), FLUSH_MS);
        timer.unref();
      }
    };
    const readTask = async (task: string) => {
      const [container] = await this.deps.containers.list({
        all: true,
        filters: new Map([['label', [`${TASK_LABEL}=${task}`]]]),
      });
      if (!container) return; // not (or no longer) on this node
      const { records } = await this.deps.containers.logs(container.Id, {
        stdout: sub.Stdout,
        stderr: sub.Stderr,
        ...(sub.Since ? { since: BigInt(sub.Since) } : {}),
        ...(sub.Tail !== undefined ? { tail: sub.Tail } : {}),
        timestamps: false,
        follow: sub.Follow,
        details: true,
        signal: ac.signal,
      });
      for await (const batch of records) {
        if (ac.signal.aborted) break;
        add(task, batch);
      }
    };
    await Promise.all(
      sub.Tasks.map((task) =>
        readTask(task).catch((err: unknown) => {
          if (!ac.signal.aborted) errors.push(`task ${task}: ${errorMessage(err)}`);
        }),
      ),
    );
    await flush(true);
  }
}
