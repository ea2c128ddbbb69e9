import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { errnoCode, errorMessage } from '../../common/errors.js';
import { type Logger, rootLogger } from '../../common/log.js';

/** A bcrypt hash of no password, compared against when a user is unknown (same time either way). */
const DUMMY_HASH = '$2b$05$3wnUbo05NyAwyhyrOPhtaOWTt1TW9gWG0BiMI8uUhb96uDO3T15YG';

/** bcryptjs, loaded on first use (a registry without htpasswd auth never pays its memory). */
let bcryptModule: Promise<typeof import('bcryptjs').default> | undefined;
function bcrypt(): Promise<typeof import('bcryptjs').default> {
  bcryptModule ??= import('bcryptjs').then((m) => m.default);
  return bcryptModule;
}

async function compare(password: string, hash: string): Promise<boolean> {
  return (await bcrypt()).compare(password, hash).catch(() => false);
}

const BCRYPT = /^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/;

export interface HtpasswdOptions {
  /** How long a verified user:password pair is remembered (ms). */
  cacheTtlMs?: number;
  /** How many verified pairs are remembered at most. */
  cacheMax?: number;
  /** How often (ms) the file's stat is checked for changes at most. */
  statIntervalMs?: number;
  log?: Logger;
}

interface CacheEntry {
  user: string;
  expires: number;
}

/**
 * Users and bcrypt password hashes from an htpasswd file (`user:$2y$...` lines), as the
 * reference registry reads them. Other hash kinds (MD5 `$apr1$`, `{SHA}`, crypt) are refused with
 * a log line naming the user; such users cannot log in.
 *
 * bcrypt is slow by design, so successful verifications are remembered for a short time, keyed by
 * a SHA-256 of user, password and stored hash (no password is kept in memory; a changed hash
 * invalidates the entry), in a bounded map. Concurrent verifications of the same pair share one
 * bcrypt run. The file is re-read when its size, mtime or inode changes (checked at most once per
 * `statIntervalMs`); a reload clears the cache.
 */
export class Htpasswd {
  private users = new Map<string, string>();
  private stamp = '';
  private lastStat = 0;
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inflight = new Map<string, Promise<boolean>>();
  private readonly ttl: number;
  private readonly max: number;
  private readonly statInterval: number;
  private readonly log: Logger;

  constructor(
    readonly path: string,
    options: HtpasswdOptions = {},
  ) {
    this.ttl = options.cacheTtlMs ?? 60_000;
    this.max = options.cacheMax ?? 4096;
    this.statInterval = options.statIntervalMs ?? 1000;
    this.log = options.log ?? rootLogger.child('htpasswd');
    this.reload(true);
  }

  /** Names of the users with a usable (bcrypt) entry. */
  userNames(): string[] {
    this.refresh();
    return [...this.users.keys()];
  }

  /** Check a user's password. */
  async verify(user: string, password: string): Promise<boolean> {
    this.refresh();
    const hash = this.users.get(user);
    if (hash === undefined) {
      // Spend the same time as for a known user, so that response times do not reveal names.
      await compare(password, DUMMY_HASH);
      return false;
    }
    const key = cacheKey(user, password, hash);
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && hit.expires > now) return true;
    if (hit) this.cache.delete(key);
    const running = this.inflight.get(key);
    if (running) return running;
    const check = compare(password, hash)
      .then((ok) => {
        if (ok) this.remember(key, user);
        return ok;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, check);
    return check;
  }

  /**
   * The user of a pair verified recently, without running bcrypt: for callers that must not wait
   * (the rate limiter keys clients by it).
   */
  cachedUser(user: string, password: string): string | undefined {
    const hash = this.users.get(user);
    if (hash === undefined) return undefined;
    const hit = this.cache.get(cacheKey(user, password, hash));
    return hit && hit.expires > Date.now() ? hit.user : undefined;
  }

  private remember(key: string, user: string): void {
    if (this.cache.size >= this.max) {
      const now = Date.now();
      for (const [k, e] of this.cache) if (e.expires <= now) this.cache.delete(k);
      // Still full: drop the oldest entries (a Map iterates in insertion order).
      for (const k of this.cache.keys()) {
        if (this.cache.size < this.max) break;
        this.cache.delete(k);
      }
    }
    this.cache.set(key, { user, expires: Date.now() + this.ttl });
  }

  private refresh(): void {
    const now = Date.now();
    if (now - this.lastStat < this.statInterval) return;
    this.lastStat = now;
    this.reload(false);
  }

  private reload(initial: boolean): void {
    let stamp: string;
    try {
      const st = statSync(this.path);
      stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch (err) {
      if (initial || errnoCode(err) !== 'ENOENT') {
        throw new Error(`htpasswd file ${this.path}: ${errorMessage(err)}`);
      }
      // The file went away: nobody can log in until it is back.
      if (this.stamp !== 'missing')
        this.log.warn('htpasswd file is gone; refusing every login', { path: this.path });
      this.stamp = 'missing';
      this.users = new Map();
      this.cache.clear();
      return;
    }
    if (stamp === this.stamp) return;
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if (initial) throw new Error(`htpasswd file ${this.path}: ${errorMessage(err)}`);
      this.log.warn('cannot re-read the htpasswd file; keeping the previous users', {
        error: errorMessage(err),
      });
      return;
    }
    this.users = parseHtpasswd(text, this.log);
    this.stamp = stamp;
    this.cache.clear();
    if (!initial) this.log.info('htpasswd file reloaded', { path: this.path, users: this.users.size });
  }
}

/** Parse htpasswd text into user → bcrypt hash, logging (and skipping) entries of other kinds. */
export function parseHtpasswd(text: string, log: Logger = rootLogger.child('htpasswd')): Map<string, string> {
  const users = new Map<string, string>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const colon = line.indexOf(':');
    if (colon <= 0) {
      log.warn('htpasswd: malformed line skipped', { line: index + 1 });
      return;
    }
    const user = line.slice(0, colon);
    const hash = line.slice(colon + 1).trim();
    if (!BCRYPT.test(hash)) {
      log.warn('htpasswd: only bcrypt ($2y$, $2a$, $2b$) password hashes are supported; user skipped', {
        user,
        line: index + 1,
        kind: hashKind(hash),
      });
      return;
    }
    users.set(user, hash);
  });
  return users;
}

function hashKind(hash: string): string {
  if (hash.startsWith('$apr1$')) return 'apr1-md5';
  if (hash.startsWith('{SHA}')) return 'sha1';
  if (hash.startsWith('$5$')) return 'sha256-crypt';
  if (hash.startsWith('$6$')) return 'sha512-crypt';
  if (hash.startsWith('$2')) return 'malformed bcrypt';
  return 'crypt or plain text';
}

function cacheKey(user: string, password: string, hash: string): string {
  return createHash('sha256')
    .update(user)
    .update('\u0000')
    .update(password)
    .update('\u0000')
    .update(hash)
    .digest('base64');
}

/** Decode `Authorization: Basic <base64(user:password)>`; undefined when absent or malformed. */
export function parseBasicAuth(header: string | undefined): { user: string; password: string } | undefined {
  if (!header) return undefined;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m?.[1]) return undefined;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Constant-time string comparison. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
