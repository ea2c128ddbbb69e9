import { type FSWatcher, watch } from 'node:fs';
import { type FileHandle, open, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { errnoCode } from '../../common/errors.js';

/**
 * The container log as the process monitor (conmon) writes it, in the Kubernetes CRI "k8s-file"
 * format: one record per line, `<RFC 3339 nano time> <stdout|stderr> <F|P> <bytes>`, where `P`
 * marks a partial record (no newline followed in the output) and `F` a full one (the newline is
 * not written). Reading a record back therefore gives the exact bytes: the content plus '\n' for F.
 */

export interface LogRecord {
  stream: 'stdout' | 'stderr';
  /** Milliseconds since the epoch. */
  timeMs: number;
  /** The timestamp as written (nanosecond precision), normalised to UTC `...Z`. */
  time: string;
  /** The record's bytes, '\n' included for full records. */
  data: Buffer;
  /** True when the record ends a line. */
  full: boolean;
}

export function parseRecord(line: Buffer): LogRecord | undefined {
  const s1 = line.indexOf(0x20);
  if (s1 < 0) return undefined;
  const s2 = line.indexOf(0x20, s1 + 1);
  if (s2 < 0) return undefined;
  const stream = line.subarray(s1 + 1, s2).toString();
  if (stream !== 'stdout' && stream !== 'stderr') return undefined;
  const flag = line[s2 + 1];
  if (flag !== 0x46 /* F */ && flag !== 0x50 /* P */) return undefined;
  const contentStart = line[s2 + 2] === 0x20 ? s2 + 3 : s2 + 2;
  const raw = line.subarray(0, s1).toString();
  const { ms, iso } = parseTime(raw);
  if (Number.isNaN(ms)) return undefined;
  const content = line.subarray(contentStart);
  const full = flag === 0x46;
  return {
    stream,
    timeMs: ms,
    time: iso,
    data: full ? Buffer.concat([content, Buffer.from('\n')]) : Buffer.from(content),
    full,
  };
}

/** Parse `2026-11-21T07:21:20.374598009+00:00` to ms and a UTC nano string. */
function parseTime(raw: string): { ms: number; iso: string } {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)$/.exec(raw);
  if (!m) return { ms: Number.NaN, iso: raw };
  const frac = (m[2] ?? '').slice(1);
  const base = Date.parse(`${m[1]}${m[3] === 'Z' ? 'Z' : m[3]}`);
  const ms = base + Number((frac + '000').slice(0, 3));
  const utc = new Date(base).toISOString().slice(0, 19);
  const fracOut = frac.replace(/0+$/, '');
  return { ms, iso: `${utc}${fracOut ? `.${fracOut}` : ''}Z` };
}

/** The log file and its rotated predecessors, oldest first (`log.N` ... `log.1`, `log`). */
export async function logFiles(path: string): Promise<string[]> {
  const dir = dirname(path);
  const base = basename(path);
  let entries: string[] = [];
  try {
    entries = await readdir(dir);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
  const rotated = entries
    .map((e) => {
      const m = e.startsWith(`${base}.`) ? /^\d+$/.exec(e.slice(base.length + 1)) : null;
      return m ? { file: join(dir, e), n: Number(m[0]) } : undefined;
    })
    .filter((x): x is { file: string; n: number } => x !== undefined)
    .sort((a, b) => b.n - a.n)
    .map((x) => x.file);
  return entries.includes(base) ? [...rotated, path] : rotated;
}

/** Read records of one file between byte offsets [from, to). */
export async function* readRecords(
  file: string,
  from = 0,
  to = Number.POSITIVE_INFINITY,
): AsyncGenerator<LogRecord> {
  let fh: FileHandle;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    throw err;
  }
  try {
    const buf = Buffer.alloc(256 * 1024);
    let pos = from;
    let pending = Buffer.alloc(0);
    while (pos < to) {
      const want = Math.min(buf.length, to - pos);
      const { bytesRead } = await fh.read(buf, 0, want, pos);
      if (bytesRead === 0) break;
      pos += bytesRead;
      pending = pending.length
        ? Buffer.concat([pending, buf.subarray(0, bytesRead)])
        : Buffer.from(buf.subarray(0, bytesRead));
      let nl = pending.indexOf(0x0a);
      while (nl >= 0) {
        const rec = parseRecord(pending.subarray(0, nl));
        if (rec) yield rec;
        pending = pending.subarray(nl + 1);
        nl = pending.indexOf(0x0a);
      }
    }
  } finally {
    await fh.close();
  }
}

/**
 * Follows a log file from a byte offset, surviving rotation (the file renamed away and a new one
 * created) and truncation. Uses inotify (fs.watch) for low latency, with polling as a safety net.
 */
export class LogTailer {
  private fh?: FileHandle;
  private ino = 0;
  private pos: number;
  private pending = Buffer.alloc(0);
  private watcher?: FSWatcher;
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly path: string,
    startOffset: number,
    private readonly onRecord: (rec: LogRecord) => void,
    private readonly pollMs = 100,
  ) {
    this.pos = startOffset;
  }

  /** Current read position in the current file. */
  get offset(): number {
    return this.pos;
  }

  start(): void {
    try {
      this.watcher = watch(dirname(this.path), { persistent: false }, () => this.kick());
      this.watcher.on('error', () => undefined);
    } catch {
      // polling only
    }
    this.timer = setInterval(() => this.kick(), this.pollMs);
    this.timer.unref();
    this.kick();
  }

  /** Read whatever is there now. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.readAvailable()
      .catch(() => undefined)
      .finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Read everything written so far (used before ending attach sessions on exit). */
  async drain(): Promise<void> {
    while (this.running) await new Promise((r) => setTimeout(r, 5));
    await this.readAvailable();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
    while (this.running) await new Promise((r) => setTimeout(r, 5));
    await this.fh?.close().catch(() => undefined);
    this.fh = undefined;
  }

  private async ensureOpen(): Promise<boolean> {
    if (this.fh) return true;
    try {
      this.fh = await open(this.path, 'r');
      this.ino = (await this.fh.stat()).ino;
      return true;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return false;
      throw err;
    }
  }

  private async readAvailable(): Promise<void> {
    if (!(await this.ensureOpen())) return;
    await this.readFromHandle();
    // Rotated or truncated? Finish the old file, then move to the new one.
    let st: { ino: number; size: number } | undefined;
    try {
      st = await stat(this.path);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    if (st && st.ino !== this.ino) {
      await this.readFromHandle();
      await this.fh?.close();
      this.fh = undefined;
      this.pos = 0;
      this.pending = Buffer.alloc(0);
      if (await this.ensureOpen()) await this.readFromHandle();
    } else if (st && st.size < this.pos) {
      this.pos = 0;
      this.pending = Buffer.alloc(0);
      await this.readFromHandle();
    }
  }

  private async readFromHandle(): Promise<void> {
    const fh = this.fh;
    if (!fh) return;
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, this.pos);
      if (bytesRead === 0) return;
      this.pos += bytesRead;
      this.pending = this.pending.length
        ? Buffer.concat([this.pending, buf.subarray(0, bytesRead)])
        : Buffer.from(buf.subarray(0, bytesRead));
      let nl = this.pending.indexOf(0x0a);
      while (nl >= 0) {
        const rec = parseRecord(this.pending.subarray(0, nl));
        this.pending = this.pending.subarray(nl + 1);
        if (rec) this.onRecord(rec);
        nl = this.pending.indexOf(0x0a);
      }
    }
  }
}

export async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return 0;
    throw err;
  }
}
