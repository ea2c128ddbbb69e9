/** What the I/O room (logs, attach, stdio) exchanges with the API layer. */

export interface LogsOptions {
  stdout: boolean;
  stderr: boolean;
  /** A Date, or unix nanoseconds (exact, as the API gives them). */
  since?: Date | bigint;
  until?: Date | bigint;
  tail?: number;
  timestamps: boolean;
  follow: boolean;
  details: boolean;
  signal?: AbortSignal;
}

export interface LogChunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
}

/** A log message as a JSON record (logs with format=json, API 1.54). */
export interface LogRecord {
  Line: string;
  Source: 'stdout' | 'stderr';
  /** RFC 3339 with nanoseconds. */
  Timestamp: string;
  Attrs?: Array<{ Key: string; Value: string }>;
}

export interface AttachOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  stream: boolean;
  logs: boolean;
  detachKeys?: string;
}

/** A live attach session: output arrives through callbacks; input through write/end. */
export interface AttachSession {
  tty: boolean;
  /** Write client input (stdin) to the container; detach keys are recognised here. */
  write(chunk: Buffer): void;
  /** The client ended its input (half-close). */
  endInput(): void;
  /** The client went away. */
  close(): void;
  /** Resolves when the session is over (container stopped, detached, or closed). */
  done: Promise<'exited' | 'detached' | 'closed'>;
}

export interface AttachSink {
  output(stream: 'stdout' | 'stderr', data: Buffer): void;
  /** The session is over: flush and end the client connection. */
  end(reason: 'exited' | 'detached' | 'closed'): void;
}
