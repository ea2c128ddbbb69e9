import type { AttachConnection } from '../../runtime/runtime.types.js';
import type { Container } from '../core/container.js';
import type { ContainerEvents } from '../core/events.js';
import type { StdioPort } from '../core/ports.js';
import { DetachScanner } from './detachkeys.js';
import type { AttachSession, AttachSink } from './io.types.js';

type EndReason = 'exited' | 'detached' | 'closed';

/** Input held for a container whose process does not run yet (beyond this it is dropped). */
const MAX_HELD_INPUT = 4 * 1024 * 1024;

/** One attached client. */
export class Session implements AttachSession {
  readonly done: Promise<EndReason>;
  private resolveDone!: (r: EndReason) => void;
  private ended = false;
  private readonly scanner?: DetachScanner;

  constructor(
    readonly tty: boolean,
    readonly want: { stdin: boolean; stdout: boolean; stderr: boolean },
    private readonly sink: AttachSink,
    private readonly hub: StdioHub,
    detachKeys: Buffer | undefined,
  ) {
    this.done = new Promise((r) => {
      this.resolveDone = r;
    });
    // dockerd looks for the detach keys on a TTY only: other stdin is passed through as it is
    if (want.stdin && tty && detachKeys) this.scanner = new DetachScanner(detachKeys);
  }

  get isOpen(): boolean {
    return !this.ended;
  }

  output(stream: 'stdout' | 'stderr', data: Buffer): void {
    if (this.ended) return;
    if (stream === 'stdout' ? this.want.stdout : this.want.stderr) this.sink.output(stream, data);
  }

  write(chunk: Buffer): void {
    if (this.ended || !this.want.stdin) return;
    if (!this.scanner) {
      this.hub.stdin(chunk);
      return;
    }
    const { pass, detach } = this.scanner.push(chunk);
    if (pass.length) this.hub.stdin(pass);
    if (detach) this.finish('detached');
  }

  /**
   * The client's stdin ended. As dockerd: with StdinOnce and no TTY the container's stdin is
   * closed (and output goes on until it exits); otherwise this attach ends.
   */
  endInput(): void {
    if (this.ended || !this.want.stdin) return;
    if (this.hub.closesStdinWith(this)) this.hub.clientInputEnded();
    else this.finish('closed');
  }

  close(): void {
    this.finish('closed');
  }

  finish(reason: EndReason): void {
    if (this.ended) return;
    this.ended = true;
    this.hub.remove(this, reason);
    this.sink.end(reason);
    this.resolveDone(reason);
  }
}

/** Opens the runtime's attach connection of a container's running process. */
export type AttachConnector = () => Promise<AttachConnection>;

/**
 * The stdio of one container as the engine shares it among attached clients: output fans out to
 * every session; input from any session goes to the container's stdin through the runtime's
 * attach connection (input arriving before the process runs is held).
 *
 * The connection is opened only while somebody needs it: at the start when a client attached
 * before it (`docker run`, `start -a`: they see the output from its first byte), else when the
 * first client attaches or input comes. A detached container's output reaches the engine once,
 * through its log, not a second time through an attach connection nobody listens to.
 */
export class StdioHub {
  private readonly sessions = new Set<Session>();
  private conn?: AttachConnection;
  /** Set while the process runs (from its start to its exit). */
  private connector?: AttachConnector;
  /** The connection being opened, and for which run (its connector). */
  private connecting?: { connector: AttachConnector; done: Promise<void> };
  private heldInput: Buffer[] = [];
  private heldBytes = 0;
  private stdinClosed = false;
  private closeStdinPending = false;

  constructor(
    private readonly opts: { stdinOnce: () => boolean; openStdin: () => boolean },
    private readonly onDetach: (s: Session) => void,
  ) {}

  add(session: Session): void {
    this.sessions.add(session);
    void this.ensureConnected().catch(() => undefined);
  }

  /**
   * The process is about to run: connect now when a client or input waits for it (before the
   * process starts: nothing it writes is missed), else when one comes.
   */
  async started(connector: AttachConnector): Promise<void> {
    this.connector = connector;
    if (this.sessions.size > 0 || this.heldBytes > 0 || this.closeStdinPending) await this.ensureConnected();
  }

  /**
   * Open the attach connection of the running process unless it is open, being opened, or there
   * is no running process. A connection that opens after its run ended is closed at once.
   */
  ensureConnected(): Promise<void> {
    const connector = this.connector;
    if (this.conn || !connector) return Promise.resolve();
    // an open under way for an earlier run does not count: this run opens its own
    if (this.connecting?.connector === connector) return this.connecting.done;
    const settled = () => {
      if (this.connecting?.done === done) this.connecting = undefined;
    };
    const done: Promise<void> = connector().then(
      (conn) => {
        settled();
        if (this.connector === connector && !this.conn) this.connect(conn);
        else conn.close();
      },
      (err: unknown) => {
        settled();
        throw err;
      },
    );
    this.connecting = { connector, done };
    return done;
  }

  remove(session: Session, reason: EndReason): void {
    if (!this.sessions.delete(session)) return;
    if (reason === 'detached') this.onDetach(session);
    // StdinOnce: stdin closes when the (one) client that had it goes away (never on a TTY, so
    // that a detached or dropped client can attach again)
    if (reason !== 'exited' && this.closesStdinWith(session)) this.clientInputEnded();
  }

  /** Whether the end of this session's input closes the container's stdin (StdinOnce, no TTY). */
  closesStdinWith(session: Session): boolean {
    return session.want.stdin && !session.tty && this.opts.stdinOnce();
  }

  get size(): number {
    return this.sessions.size;
  }

  broadcast(stream: 'stdout' | 'stderr', data: Buffer): void {
    for (const s of this.sessions) s.output(stream, data);
  }

  /** The running process's attach connection: its output to the sessions, their input to it. */
  private connect(conn: AttachConnection): void {
    this.conn = conn;
    conn.on('stdout', (d: Buffer) => this.broadcast('stdout', d));
    conn.on('stderr', (d: Buffer) => this.broadcast('stderr', d));
    conn.on('error', () => undefined);
    conn.on('close', () => {
      if (this.conn === conn) this.conn = undefined;
    });
    for (const chunk of this.heldInput) conn.writeStdin(chunk);
    this.heldInput = [];
    this.heldBytes = 0;
    if (this.closeStdinPending) {
      this.closeStdinPending = false;
      this.stdinClosed = true;
      conn.closeStdin();
    }
  }

  stdin(chunk: Buffer): void {
    if (!this.opts.openStdin() || this.stdinClosed) return;
    if (this.conn) this.conn.writeStdin(chunk);
    else {
      if (this.heldBytes + chunk.length <= MAX_HELD_INPUT) {
        this.heldInput.push(chunk);
        this.heldBytes += chunk.length;
      }
      void this.ensureConnected().catch(() => undefined);
    }
  }

  clientInputEnded(): void {
    if (!this.opts.stdinOnce() || this.stdinClosed) return;
    if (this.conn) {
      this.stdinClosed = true;
      this.conn.closeStdin();
    } else {
      this.closeStdinPending = true;
      void this.ensureConnected().catch(() => undefined);
    }
  }

  /** The process ended: drop the runtime connection, end every session. */
  exited(): void {
    const conn = this.conn;
    this.conn = undefined;
    this.connector = undefined;
    this.heldInput = [];
    this.heldBytes = 0;
    this.closeStdinPending = false;
    // the next run has a fresh stdin (input sent before it starts is held for it)
    this.stdinClosed = false;
    conn?.close();
    for (const s of [...this.sessions]) s.finish('exited');
  }

  /** Disconnect from the runtime without ending sessions (engine shutdown). */
  disconnect(): void {
    this.connector = undefined;
    this.conn?.close();
    this.conn = undefined;
  }
}

/**
 * The stdio hubs of the engine's containers (one per container, made on first use): the state
 * machine connects a running process to its hub, attach adds sessions to it.
 */
export class StdioHubs implements StdioPort {
  private readonly hubs = new Map<string, StdioHub>();

  constructor(private readonly events: ContainerEvents) {}

  of(c: Container): StdioHub {
    let hub = this.hubs.get(c.id);
    if (!hub) {
      hub = new StdioHub(
        {
          stdinOnce: () => c.record.Config.StdinOnce === true,
          openStdin: () => c.record.Config.OpenStdin === true,
        },
        () => this.events.emit(c, 'detach'),
      );
      this.hubs.set(c.id, hub);
    }
    return hub;
  }

  started(c: Container, connector: AttachConnector): Promise<void> {
    return this.of(c).started(connector);
  }

  exited(c: Container): void {
    this.hubs.get(c.id)?.exited();
  }

  disconnect(c: Container): void {
    this.hubs.get(c.id)?.disconnect();
  }

  removed(c: Container): void {
    this.hubs.get(c.id)?.exited();
    this.hubs.delete(c.id);
  }
}
