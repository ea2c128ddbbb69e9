/**
 * Service and task logs across the swarm (swarmkit's logbroker model): the manager that gets
 * `GET /services/{id}/logs` or `/tasks/{id}/logs` sends a subscription to each node with tasks
 * in it (a `logs` line in that node's assignments stream); the node's agent reads its task
 * containers' logs and POSTs them back in batches to `/v1/logs/<subscription>`.
 */

/** What a node is asked for: its tasks' logs read as `docker logs` would with these options. */
export interface LogSubscription {
  ID: string;
  /** The tasks of this node whose containers' logs are wanted. */
  Tasks: string[];
  Follow: boolean;
  /** Lines per task from the end; absent: all. */
  Tail?: number;
  /** Unix nanoseconds, as a decimal string; absent: from the beginning. */
  Since?: string;
  Stdout: boolean;
  Stderr: boolean;
  /** The manager to POST the lines to when not the one whose stream carried it (log-relay.ts). */
  Manager?: string;
}

/** One line of a task's container log as the agent sends it. */
export interface AgentLogLine {
  Task: string;
  Stream: 'stdout' | 'stderr';
  /** RFC 3339 with nanoseconds. */
  Time: string;
  /** The line's bytes, base64 (a line may not be UTF-8). */
  Data: string;
  /** The log attributes of the container (`--log-opt labels/env`), if any. */
  Attrs?: Record<string, string>;
}

/** `POST /v1/logs/<subscription>`: a batch of lines; `Done` when the node has sent all it will. */
export interface LogPublishCall {
  Lines: AgentLogLine[];
  Done?: boolean;
  /** Why the node could not read a task's logs (reported, the others go on). */
  Errors?: string[];
}

/** Whether the subscription still wants lines (false: the client left; the node stops reading). */
export interface LogPublishAnswer {
  Active: boolean;
}
