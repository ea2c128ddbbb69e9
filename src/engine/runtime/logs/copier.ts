import { existsSync, type FSWatcher, fstatSync, watch } from 'node:fs';
import { link } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import { rm, stat } from '../../../common/fs/quick.js';
import { RecordAssembler } from './assembler.js';
import { type CopierState, loadCopierState, saveCopierState } from './copier-state.js';
import { LineReader } from './files.js';
import { JsonEntryEncoder } from './json-file.js';
import { type FileIdentity, identityOf, JsonLogWriter, sameFile } from './json-writer.js';
import { LogFd } from './log-fd.js';
import type { LogLimits } from './rotate.js';

export interface LogCopierOptions {
  /** The monitor's output: conmon's k8s-file (`-l k8s-file:<source>`). */
  source: string;
  /** The container's log, written in json-file format and rotated as `target.1` ... */
  target: string;
  limits: LogLimits;
  /** `attrs` of every entry (json-file's labels/env options). */
  attrs?: Record<string, string>;
  /** Ask the monitor to reopen `source` (the driver's reopenLog); none: never asked. */
  reopen?: () => Promise<void>;
  /** Bytes read from one source file after which the monitor is asked to reopen it. */
  reopenAfter?: number;
  onError?: (err: unknown) => void;
}

/** One file the monitor wrote to, open for reading. */
interface Source {
  handle: LogFd;
  id: FileIdentity;
  reader: LineReader<LogFd>;
  /** Offset after the last whole record taken from it. */
  consumed: number;
}

const REOPEN_AFTER = 1 << 20;
/** Reads of the monitor's output: most wakes find a few lines, a backlog is read in these. */
const READ_SIZE = 256 * 1024;
/** The longest a committed position waits before it is saved. */
const SAVE_AFTER = 200;
const NL = 0x0a;

function openSource(path: string, offset: number): Source | null {
  let handle: LogFd;
  try {
    handle = LogFd.open(path, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return null;
    throw err;
  }
  const st = fstatSync(handle.fd);
  const at = offset <= st.size ? offset : 0;
  return { handle, id: identityOf(st), reader: new LineReader(handle, at, READ_SIZE), consumed: at };
}

async function unlinkIfExists(path: string): Promise<void> {
  await rm(path, { force: true });
}

/**
 * The engine's log writer for one container, as dockerd's copier + json-file driver: follows
 * what conmon writes to `source` (k8s-file), writes it to `target` in json-file format with
 * rotation, and keeps `source` small by having conmon reopen it once read past `reopenAfter`.
 *
 * - Event-driven: one fs.watch on the source's directory; nothing runs while the container is
 *   silent.
 * - No loss across reopens: before asking conmon to reopen, the copier links the file as
 *   `<source>.old`; it reads its open file to the end once a newer file is at `source` (conmon
 *   closed the old one before), then moves on and drops the link. Files conmon replaced by itself
 *   (its size cap) are opened as soon as they appear.
 * - Restartable: `<source>.state` (CopierState) is saved within SAVE_AFTER ms of a write to
 *   `target`, and at once around rotations and file switches; a copier started later (engine
 *   restart, kill -9) truncates `target` back to it and reads on from there, through
 *   `<source>.old` when a reopen was under way. What the container wrote meanwhile is waiting in
 *   `source` (conmon kept appending; only its own size cap, if any, drops data).
 */
export class LogCopier {
  private writer!: JsonLogWriter;
  private readonly enc: JsonEntryEncoder;
  private readonly asm: RecordAssembler;
  private current: Source | null = null;
  /** Files conmon moved on to, oldest first. */
  private readonly newer: Source[] = [];
  private watcher: FSWatcher | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private discovering: Promise<void> = Promise.resolve();
  /** The last commit's write. */
  private inflight: Promise<void> = Promise.resolve();
  /** The position after the last commit, not saved yet, and that commit's write. */
  private unsaved: { state: CopierState; written: Promise<void> } | null = null;
  private saveTimer: NodeJS.Timeout | null = null;
  /** State saves, one after the other. */
  private saving: Promise<void> = Promise.resolve();
  /** A state was saved (or loaded): there is a point to go back to. */
  private saved = false;
  /** The file linked as `<source>.old`. */
  private oldLink: FileIdentity | null = null;
  /** The file whose reopen was asked for. */
  private reopenAsked: FileIdentity | null = null;
  private readonly statePath: string;
  private readonly oldPath: string;
  private readonly onError: (err: unknown) => void;

  private constructor(private readonly o: LogCopierOptions) {
    this.enc = new JsonEntryEncoder(o.attrs);
    this.asm = new RecordAssembler(this.enc);
    this.statePath = `${o.source}.state`;
    this.oldPath = `${o.source}.old`;
    this.onError = o.onError ?? (() => undefined);
  }

  /** Start copying: take up where an earlier copier stopped, then follow the source. */
  static async start(o: LogCopierOptions): Promise<LogCopier> {
    const c = new LogCopier(o);
    await c.recover();
    c.watch();
    c.kick();
    return c;
  }

  private async recover(): Promise<void> {
    const state = await loadCopierState(this.statePath);
    this.writer = await JsonLogWriter.open(this.o.target, this.o.limits, this.onError);
    if (state) {
      this.saved = true;
      // entries written after the state was saved are written again from the source
      if (sameFile(this.writer.identity, state.log) && this.writer.size > state.log.size) {
        await this.writer.truncate(state.log.size);
      }
      this.asm.restore(state.pending);
    }
    // only this copier links it (before a reopen): its absence, the usual case, is seen at once
    const old = existsSync(this.oldPath) ? openSource(this.oldPath, 0) : null;
    const cur = openSource(this.o.source, 0);
    const from = state?.source ?? null;
    const at = async (s: Source, offset: number) => {
      const to = offset <= fstatSync(s.handle.fd).size ? offset : 0;
      await s.reader.reset(to);
      s.consumed = to;
    };
    if (old && (sameFile(old.id, cur?.id) || (from && sameFile(from, cur?.id)))) {
      // linked but never reopened, or read to its end (the state names the newer file already)
      await old.handle.close();
      await unlinkIfExists(this.oldPath);
    } else if (old) {
      // a reopen was under way: the old file first, from where the state says if it names it
      this.oldLink = old.id;
      this.reopenAsked = old.id;
      this.current = old;
      if (from && sameFile(from, old.id)) await at(old, from.offset);
      if (cur) this.newer.push(cur);
      return;
    }
    this.current = cur;
    // when the state names another file, that one was read to its end, or dropped by conmon's
    // own size cap while the engine was away: this one is read from its start
    if (cur && from && sameFile(from, cur.id)) await at(cur, from.offset);
  }

  private watch(): void {
    const base = basename(this.o.source);
    const tmp = `${base}.tmp`;
    try {
      this.watcher = watch(dirname(this.o.source), { persistent: false }, (event, name) => {
        const n = name?.toString();
        if (n !== base && n !== tmp && n !== undefined) return;
        // a new file at `source` (conmon reopened): open it now, before conmon may replace it again
        if (event === 'rename') this.discover().catch(this.onError);
        this.kick();
      });
      this.watcher.on('error', (err) => this.onError(err));
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
  }

  /** Copy what is there now; coalesced (one pass at a time, one more if woken meanwhile). */
  private kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.pump(false);
      } while (this.again && !this.stopped);
    })()
      .catch((err) => this.onError(err))
      .finally(() => {
        this.running = null;
      });
  }

  private known(id: FileIdentity): boolean {
    return sameFile(this.current?.id, id) || this.newer.some((s) => sameFile(s.id, id));
  }

  /** Open the file at `source` when it is one not seen yet (conmon reopened it). */
  private discover(): Promise<void> {
    this.discovering = this.discovering.then(async () => {
      const st = await stat(this.o.source).catch((err) => {
        if (errnoCode(err) === 'ENOENT') return null;
        throw err;
      });
      if (!st || this.known(identityOf(st))) return;
      const s = openSource(this.o.source, 0);
      if (!s) return;
      if (this.known(s.id)) await s.handle.close();
      else if (this.current) this.newer.push(s);
      else this.current = s;
    });
    return this.discovering;
  }

  private async pump(final: boolean): Promise<void> {
    for (;;) {
      if (!this.current) {
        await this.discover();
        if (!this.current) break;
      }
      const cur: Source = this.current;
      const blocks = await cur.reader.nextBlocks();
      if (blocks.length > 0) {
        await this.consume(cur, blocks);
        if (!final) await this.askReopen();
        continue;
      }
      await this.discover();
      if (this.newer.length === 0) break;
      // conmon closed this file before it made the newer one: one more read gets its last bytes
      const last = await cur.reader.nextBlocks();
      if (last.length > 0) {
        await this.consume(cur, last);
        continue;
      }
      await this.nextSource();
    }
    if (final) {
      this.asm.flush();
      if (this.enc.length > 0) await this.commit();
      await this.settle();
      await this.flushState();
    } else await this.askReopen();
  }

  /** Take blocks of whole records (LineReader.nextBlocks) from `src`. */
  private async consume(src: Source, blocks: Buffer[]): Promise<void> {
    // a point to come back to before the first entry is ever written
    if (!this.saved) await this.save();
    for (const block of blocks) {
      let start = 0;
      for (let nl = block.indexOf(NL); nl >= 0; nl = block.indexOf(NL, start)) {
        if (this.writer.needsRotation(this.enc.length)) {
          // where we are (before this record) is recorded on both sides of the rotation
          await this.commit();
          await this.settle();
          await this.writer.rotate();
          await this.save();
        }
        this.asm.push(block, start, nl + 1);
        src.consumed += nl + 1 - start;
        start = nl + 1;
      }
    }
    if (this.enc.length > 0) await this.commit();
  }

  /**
   * Write what is encoded; the write goes on while the next chunk is worked on (one at a time:
   * this waits for the previous one). The new position is saved within SAVE_AFTER ms (a crash
   * before that only makes the next copier redo more).
   */
  private async commit(): Promise<void> {
    await this.settle();
    const written = this.writer.write(this.enc.take());
    this.inflight = written;
    // surfaces at the next settle()
    written.catch(() => undefined);
    this.unsaved = { state: this.state(), written };
    if (!this.saveTimer) {
      this.saveTimer = setTimeout(() => {
        this.saveTimer = null;
        this.saveUnsaved().catch((err) => this.onError(err));
      }, SAVE_AFTER);
      this.saveTimer.unref();
    }
  }

  /** Save the last committed position once its write is done; saves go one at a time, in order. */
  private saveUnsaved(): Promise<void> {
    this.saving = this.saving.then(async () => {
      const u = this.unsaved;
      if (!u) return;
      this.unsaved = null;
      // a failed write is not saved as done (its error surfaces at the next settle)
      if (
        await u.written.then(
          () => true,
          () => false,
        )
      )
        await saveCopierState(this.statePath, u.state);
    });
    return this.saving;
  }

  /** Save what is committed and not saved yet, now. */
  private async flushState(): Promise<void> {
    if (this.saveTimer) {
      clearTimeout(this.saveTimer);
      this.saveTimer = null;
    }
    await this.saveUnsaved();
  }

  /** The position now: what is encoded is written (or being written). */
  private state(): CopierState {
    const cur = this.current;
    const state: CopierState = {
      v: 1,
      source: cur ? { ...cur.id, offset: cur.consumed } : null,
      log: { ...this.writer.identity, size: this.writer.size },
    };
    if (this.asm.hasPending) state.pending = this.asm.snapshot();
    return state;
  }

  /** Wait for the last write. */
  private async settle(): Promise<void> {
    const p = this.inflight;
    this.inflight = Promise.resolve();
    await p;
  }

  /** Save the position now: only between records (nothing encoded that is not written). */
  private async save(): Promise<void> {
    await this.settle();
    this.unsaved = { state: this.state(), written: Promise.resolve() };
    await this.flushState();
    this.saved = true;
  }

  /** The current file is read to its end and conmon writes a newer one: move on. */
  private async nextSource(): Promise<void> {
    const done = this.current!;
    this.current = this.newer.shift() ?? null;
    // the state names the new file before the old one can go
    if (this.saved || this.asm.hasPending) await this.save();
    await done.handle.close();
    if (this.oldLink && sameFile(this.oldLink, done.id)) {
      this.oldLink = null;
      await unlinkIfExists(this.oldPath);
    }
    if (sameFile(this.reopenAsked, done.id)) this.reopenAsked = null;
  }

  /** Have conmon start a new file once this one was read far enough, keeping a link to it. */
  private async askReopen(): Promise<void> {
    const cur = this.current;
    if (!this.o.reopen || this.stopped || !cur || this.reopenAsked || this.newer.length > 0) return;
    if (cur.consumed < (this.o.reopenAfter ?? REOPEN_AFTER)) return;
    await unlinkIfExists(this.oldPath);
    try {
      await link(this.o.source, this.oldPath);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw err;
    }
    if (!sameFile(identityOf(await stat(this.oldPath)), cur.id)) {
      // conmon moved on by itself meanwhile; the copier will find the newer file
      await unlinkIfExists(this.oldPath);
      return;
    }
    this.oldLink = cur.id;
    this.reopenAsked = cur.id;
    try {
      await this.o.reopen();
    } catch (err) {
      // the container is gone (its exit is coming): nothing to reopen
      this.oldLink = null;
      await unlinkIfExists(this.oldPath);
      this.onError(err);
    }
  }

  private async stopWork(): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    this.watcher = null;
    await this.running?.catch(() => undefined);
    await this.discovering.catch(() => undefined);
    await this.settle().catch((err) => this.onError(err));
    await this.flushState().catch((err) => this.onError(err));
  }

  private async release(): Promise<void> {
    for (const s of [this.current, ...this.newer]) await s?.handle.close().catch(() => undefined);
    this.current = null;
    this.newer.length = 0;
    await this.writer.close();
  }

  /**
   * The container's output ended (its process exited: conmon wrote everything before its exit
   * file): copy the rest, unfinished lines as partial entries, and stop. When this resolves the
   * log is complete.
   */
  async finish(): Promise<void> {
    await this.stopWork();
    try {
      await this.pump(true);
      if (this.oldLink) {
        this.oldLink = null;
        await unlinkIfExists(this.oldPath);
      }
    } finally {
      await this.release();
    }
  }

  /**
   * Stop following (the engine stops; the container goes on): what is written stays, unfinished
   * lines and the position are in the state for the next copier.
   */
  async close(): Promise<void> {
    await this.stopWork();
    await this.release();
  }
}
