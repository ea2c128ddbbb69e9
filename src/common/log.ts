/** A small leveled logger writing one line per record to stderr. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export class Logger {
  /** The level set on this logger; a child without one follows its parent's (a reload changes it). */
  private own?: LogLevel;

  constructor(
    level: LogLevel = 'info',
    private readonly scope = '',
    private readonly parent?: Logger,
  ) {
    if (!parent) this.own = level;
  }

  setLevel(level: LogLevel): void {
    this.own = level;
  }

  get level(): LogLevel {
    return this.own ?? this.parent?.level ?? 'info';
  }

  /** A logger for a part: its scope under this one's, its level this one's (now and later). */
  child(scope: string): Logger {
    return new Logger(this.level, this.scope ? `${this.scope}/${scope}` : scope, this);
  }

  enabled(level: LogLevel): boolean {
    return order[level] >= order[this.level];
  }

  debug(msg: string, fields?: Record<string, unknown>): void {
    this.write('debug', msg, fields);
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.write('info', msg, fields);
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.write('warn', msg, fields);
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.write('error', msg, fields);
  }

  private write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
    if (!this.enabled(level)) return;
    let line = `time="${new Date().toISOString()}" level=${level}`;
    if (this.scope) line += ` scope=${this.scope}`;
    line += ` msg=${JSON.stringify(msg)}`;
    if (fields) {
      for (const [k, v] of Object.entries(fields)) line += ` ${k}=${JSON.stringify(v)}`;
    }
    writeLine(`${line}\n`);
  }
}

/** Set once stderr has failed (its reader is gone): log lines have nowhere to go and are dropped. */
let stderrClosed = false;
let stderrGuarded = false;

/**
 * One line to stderr. A stderr whose reader went away (the terminal or pipe that started the
 * process closed) fails every write with EPIPE, emitted later as an 'error' event: unhandled, it is
 * an uncaught exception, which is logged, which fails again — a loop that kept an engine busy and
 * deaf to everything but /_ping. Logging stops instead; nothing else does.
 */
function writeLine(line: string): void {
  if (stderrClosed) return;
  if (!stderrGuarded) {
    stderrGuarded = true;
    process.stderr.on('error', () => {
      stderrClosed = true;
    });
  }
  process.stderr.write(line);
}

export function parseLogLevel(value: string): LogLevel {
  if (value === 'debug' || value === 'info' || value === 'warn' || value === 'error') return value;
  if (value === 'warning') return 'warn';
  throw new Error(`invalid log level ${JSON.stringify(value)}: use debug, info, warn or error`);
}

export const rootLogger = new Logger(
  process.env.BERTH_LOG_LEVEL ? parseLogLevel(process.env.BERTH_LOG_LEVEL) : 'info',
);
