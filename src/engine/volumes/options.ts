import { invalidParameter } from '../../common/errors.js';

/** Driver options the local driver knows (as moby's local driver). */
const VALID = new Set(['type', 'o', 'device', 'size']);
/** An option that needs another. */
const REQUIRES: Record<string, string[]> = { device: ['type'], type: ['device'], o: ['device'] };

/**
 * go-units' RAMInBytes (as dockerd 20.10 vendors it): `<number>[ ][kmgtp][i][b]`, binary
 * multiples. Malformed sizes throw its messages: bad input, a 400 (dockerd answers 500 for them).
 */
export function ramInBytes(value: string): number {
  const m = /^(\d+(?:\.\d+)*) ?([kKmMgGtTpP])?[iI]?[bB]?$/.exec(value);
  if (!m?.[1]) throw invalidParameter(`invalid size: '${value}'`);
  if (!/^\d+(\.\d+)?$/.test(m[1])) {
    throw invalidParameter(`strconv.ParseFloat: parsing ${JSON.stringify(m[1])}: invalid syntax`);
  }
  const unit = (m[2] ?? '').toLowerCase();
  const mul = unit ? 1024 ** ('kmgtp'.indexOf(unit) + 1) : 1;
  return Math.trunc(Number(m[1]) * mul);
}

/**
 * Validate local driver options in moby's order: unknown keys, then options that need others,
 * then `size` (malformed or above zero: no quota support here, 400). The
 * caller adds `create <name>: `.
 */
export function checkLocalOptions(opts: Record<string, string>): void {
  for (const [key, value] of Object.entries(opts)) {
    if (!VALID.has(key)) throw invalidParameter(`invalid option: ${JSON.stringify(key)}`);
    if (typeof value !== 'string') throw invalidParameter(`invalid option value for ${JSON.stringify(key)}`);
  }
  for (const [key, needs] of Object.entries(REQUIRES)) {
    if (!(key in opts)) continue;
    for (const need of needs) {
      if (!(need in opts)) throw invalidParameter(`missing required option: ${JSON.stringify(need)}`);
    }
  }
  if (opts.size !== undefined) {
    if (ramInBytes(opts.size) > 0) throw invalidParameter('quota size requested but no quota support');
  }
}

/** A volume whose `_data` gets a mount of its own (tmpfs, a bind, a device) while it is in use. */
export function needsMount(opts: Record<string, string>): boolean {
  return Boolean(opts.type || opts.device);
}

/** Mount arguments for a local volume with options. A bind (`o=bind`) gets its device as a path. */
export function mountArgs(opts: Record<string, string>): { type: string; device: string; options: string } {
  return { type: opts.type ?? '', device: opts.device ?? '', options: opts.o ?? '' };
}

const MS_RDONLY = 0x1;
const MS_NOSUID = 0x2;
const MS_NODEV = 0x4;
const MS_NOEXEC = 0x8;
const MS_SYNCHRONOUS = 0x10;
const MS_REMOUNT = 0x20;
const MS_MANDLOCK = 0x40;
const MS_DIRSYNC = 0x80;
const MS_NOATIME = 0x400;
const MS_NODIRATIME = 0x800;
const MS_BIND = 0x1000;
const MS_REC = 0x4000;
const MS_UNBINDABLE = 0x20000;
const MS_PRIVATE = 0x40000;
const MS_SLAVE = 0x80000;
const MS_SHARED = 0x100000;
const MS_RELATIME = 0x200000;
const MS_STRICTATIME = 0x1000000;
/** Propagation flags: moby applies them in a second mount(2) call. */
const PROPAGATION = MS_SHARED | MS_PRIVATE | MS_SLAVE | MS_UNBINDABLE;

/** moby/sys/mount's option table: [clear, flag]. */
const FLAGS: Record<string, [boolean, number]> = {
  defaults: [false, 0],
  ro: [false, MS_RDONLY],
  rw: [true, MS_RDONLY],
  suid: [true, MS_NOSUID],
  nosuid: [false, MS_NOSUID],
  dev: [true, MS_NODEV],
  nodev: [false, MS_NODEV],
  exec: [true, MS_NOEXEC],
  noexec: [false, MS_NOEXEC],
  sync: [false, MS_SYNCHRONOUS],
  async: [true, MS_SYNCHRONOUS],
  dirsync: [false, MS_DIRSYNC],
  remount: [false, MS_REMOUNT],
  mand: [false, MS_MANDLOCK],
  nomand: [true, MS_MANDLOCK],
  atime: [true, MS_NOATIME],
  noatime: [false, MS_NOATIME],
  diratime: [true, MS_NODIRATIME],
  nodiratime: [false, MS_NODIRATIME],
  bind: [false, MS_BIND],
  rbind: [false, MS_BIND | MS_REC],
  unbindable: [false, MS_UNBINDABLE],
  runbindable: [false, MS_UNBINDABLE | MS_REC],
  private: [false, MS_PRIVATE],
  rprivate: [false, MS_PRIVATE | MS_REC],
  shared: [false, MS_SHARED],
  rshared: [false, MS_SHARED | MS_REC],
  slave: [false, MS_SLAVE],
  rslave: [false, MS_SLAVE | MS_REC],
  relatime: [false, MS_RELATIME],
  norelatime: [true, MS_RELATIME],
  strictatime: [false, MS_STRICTATIME],
  nostrictatime: [true, MS_STRICTATIME],
};

/**
 * The mount(2) flags (without propagation) and data string moby's local driver derives from `o`
 * (moby/sys/mount parseOptions): known flag words become flags, everything else (`defaults`
 * too) is data for the file system.
 */
export function mountFlags(o: string): { flags: number; data: string } {
  let flags = 0;
  const data: string[] = [];
  for (const word of o.split(',')) {
    const f = Object.hasOwn(FLAGS, word) ? FLAGS[word] : undefined;
    if (f && f[1] !== 0) {
      if (f[0]) flags &= ~f[1];
      else flags |= f[1];
    } else data.push(word);
  }
  return { flags: (flags & ~PROPAGATION) >>> 0, data: data.join(',') };
}

/**
 * The text of a failed mount as moby's local driver words it (the caller adds `error while
 * mounting volume '<path>': `): `failed to mount local volume: mount <device>:<target>, flags:
 * 0x1000, data: <data>: <errno text>` (flags and data only when there are any).
 */
export function mountFailure(
  opts: { device: string; options: string; target: string },
  reason: string,
): string {
  const { flags, data } = mountFlags(opts.options);
  let out = `mount ${opts.device ? `${opts.device}:${opts.target}` : opts.target}`;
  if (flags !== 0) out += `, flags: 0x${flags.toString(16)}`;
  if (data !== '') out += `, data: ${data}`;
  return `failed to mount local volume: ${out}: ${reason}`;
}
