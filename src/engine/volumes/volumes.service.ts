import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  BerthError,
  conflict,
  errnoCode,
  errorMessage,
  invalidParameter,
  isBerthError,
  notFound,
  systemError,
} from '../../common/errors.js';
import { fsyncDir, writeJsonAtomic } from '../../common/fs/atomic.js';
import { diskUsage } from '../../common/fs/disk-usage.js';
import type { Logger } from '../../common/log.js';
import { Mutex } from '../../common/mutex.js';
import type { EventsService } from '../events/events.service.js';
import { filterVolumes, pruneMatches, pruneScope } from './filters.js';
import { HostVolumeOps, type VolumeOps } from './mount.adapter.js';
import { ANONYMOUS_LABEL, anonymousName, checkVolumeName, NAME_MAX, VOLUME_NAME } from './names.js';
import { checkLocalOptions, mountArgs, needsMount } from './options.js';
import { VolumeRefs } from './refs.js';
import type {
  CreateVolumeRequest,
  VolumeInfo,
  VolumeMountUse,
  VolumeRecord,
  VolumeService,
} from './volumes.types.js';

export type { VolumeService } from './volumes.types.js';

export interface VolumeServiceOptions {
  dataRoot: string;
  events: EventsService;
  log: Logger;
  /** Host operations (mount, copy); the real ones by default. */
  ops?: VolumeOps;
}

const META = 'volume.json';
const DATA = '_data';

function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw invalidParameter(`${what} must be an object`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v !== 'string')
      throw invalidParameter(`${what}: value of ${JSON.stringify(k)} must be a string`);
    out[k] = v;
  }
  return out;
}

/**
 * The local volume driver and the volume store: volumes under `<data-root>/volumes/<name>/_data`,
 * their metadata in `<name>/volume.json` (written atomically, before `_data` exists), which
 * containers reference them, and the device mounts of volumes created with driver options.
 */
export async function createVolumeService(opts: VolumeServiceOptions): Promise<VolumeService> {
  const root = join(opts.dataRoot, 'volumes');
  const ops = opts.ops ?? new HostVolumeOps();
  const log = opts.log;
  const volumes = new Map<string, VolumeRecord>();
  const refs = new VolumeRefs();
  /** Running containers using a volume's mounted device. */
  const active = new VolumeRefs();
  const lock = new Mutex();

  await mkdir(root, { recursive: true, mode: 0o701 });
  await load();

  const dirOf = (name: string) => join(root, name);
  const dataOf = (name: string) => join(root, name, DATA);

  function info(v: VolumeRecord): VolumeInfo {
    return {
      ...v,
      Labels: { ...v.Labels },
      Options: { ...v.Options },
      Mountpoint: dataOf(v.Name),
      Scope: 'local',
    };
  }

  function getRecord(name: string, verb = 'get'): VolumeRecord {
    const v = volumes.get(name);
    if (!v) throw notFound(`${verb} ${name}: no such volume`);
    return v;
  }

  async function load(): Promise<void> {
    const entries = await readdir(root, { withFileTypes: true });
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const dir = join(root, e.name);
      if (e.name.startsWith('.removing-')) {
        // A removal a crash interrupted: finish it unless something is mounted there.
        if ((await ops.mountsUnder(dir)).length === 0) await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (!VOLUME_NAME.test(e.name)) continue;
      let rec: VolumeRecord | undefined;
      try {
        const raw = JSON.parse(await readFile(join(dir, META), 'utf8')) as Partial<VolumeRecord>;
        rec = {
          Name: e.name,
          Driver: 'local',
          Labels: stringMap(raw.Labels, 'Labels'),
          Options: stringMap(raw.Options, 'Options'),
          CreatedAt: typeof raw.CreatedAt === 'string' ? raw.CreatedAt : rfc3339(new Date()),
        };
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT')
          log.warn('volume metadata unreadable', { name: e.name, error: errorMessage(err) });
        // No (readable) metadata: a volume directory from elsewhere (or an older berth): keep it.
        const st = await stat(join(dir, DATA)).catch(() => undefined);
        if (!st?.isDirectory()) continue;
        rec = { Name: e.name, Driver: 'local', Labels: {}, Options: {}, CreatedAt: rfc3339(st.mtime) };
        await writeJsonAtomic(join(dir, META), rec);
      }
      // Metadata is written first: a crash before `_data` existed leaves it to be made now.
      await mkdir(join(dir, DATA), { recursive: true, mode: 0o755 });
      volumes.set(e.name, rec);
    }
  }

  /** The same error (same kind; System for a plain one) with `<prefix>: ` in front, as dockerd wraps. */
  function withPrefix(prefix: string, err: unknown): BerthError {
    if (!isBerthError(err)) return systemError(`${prefix}: ${errorMessage(err)}`);
    return new BerthError(err.kind, `${prefix}: ${err.message}`, err.detail);
  }

  async function createLocked(req: CreateVolumeRequest, reference?: string): Promise<VolumeInfo> {
    if (req === null || typeof req !== 'object') throw invalidParameter('invalid volume create request');
    const driver = req.Driver ?? '';
    if (typeof driver !== 'string') throw invalidParameter('Driver must be a string');
    if (req.Name !== undefined && req.Name !== null && typeof req.Name !== 'string') {
      throw invalidParameter('Name must be a string');
    }
    const labels = stringMap(req.Labels, 'Labels');
    const options = stringMap(req.DriverOpts, 'DriverOpts');
    let name = req.Name ?? '';
    if (name === '') {
      name = anonymousName();
      labels[ANONYMOUS_LABEL] = '';
    }
    // dockerd's order: the driver first (there are no plugins: anything but local is unknown,
    // for an existing name too), then an existing volume answers as it is (labels and options
    // stay), then the local driver checks the name, makes the directory, checks the options.
    if (driver !== '' && driver !== 'local') {
      throw notFound(
        `create ${name}: error looking up volume plugin ${driver}: plugin "${driver}" not found`,
      );
    }
    const existing = volumes.get(name);
    if (existing) {
      if (reference) refs.add(name, reference);
      // dockerd announces `create` for every create, of an existing volume too.
      opts.events.publish('volume', 'create', name, { driver: 'local' });
      return info(existing);
    }
    const dir = dirOf(name);
    try {
      checkVolumeName(name);
      if (Buffer.byteLength(name) > NAME_MAX) {
        throw invalidParameter(
          `error while creating volume root path '${dir}': mkdir ${dir}: file name too long`,
        );
      }
      checkLocalOptions(options);
    } catch (err) {
      throw withPrefix(`create ${name}`, err);
    }
    const rec: VolumeRecord = {
      Name: name,
      Driver: 'local',
      Labels: labels,
      Options: options,
      CreatedAt: rfc3339(new Date()),
    };
    await mkdir(dir, { recursive: true, mode: 0o755 }).catch((err) => {
      const kind = errnoCode(err) === 'ENAMETOOLONG' ? invalidParameter : systemError;
      throw kind(`create ${name}: error while creating volume root path '${dir}': ${errorMessage(err)}`);
    });
    await writeJsonAtomic(join(dir, META), rec);
    await mkdir(join(dir, DATA), { mode: 0o755 }).catch((err) => {
      if (errnoCode(err) !== 'EEXIST') throw err;
    });
    await fsyncDir(root);
    volumes.set(name, rec);
    if (reference) refs.add(name, reference);
    opts.events.publish('volume', 'create', name, { driver: 'local' });
    return info(rec);
  }

  /** Remove a volume; `quiet`: no `destroy` event (prune announces only itself, as dockerd). */
  async function removeLocked(name: string, quiet = false): Promise<number> {
    getRecord(name);
    const users = refs.ids(name);
    if (users.length > 0) throw conflict(`remove ${name}: volume is in use - [${users.join(', ')}]`);
    const dir = dirOf(name);
    if ((await ops.mountsUnder(dataOf(name))).length > 0) await ops.unmount(dataOf(name));
    const left = await ops.mountsUnder(dir);
    if (left.length > 0) throw conflict(`remove ${name}: volume is still mounted at ${left.join(', ')}`);
    const size = await diskUsage(dataOf(name)).catch(() => 0);
    // A name can be NAME_MAX long: only its start goes into the temporary name.
    const doomed = join(root, `.removing-${name.slice(0, 200)}-${Date.now()}`);
    await rename(dir, doomed);
    await fsyncDir(root);
    volumes.delete(name);
    refs.forget(name);
    active.forget(name);
    await rm(doomed, { recursive: true, force: true });
    if (!quiet) opts.events.publish('volume', 'destroy', name, { driver: 'local' });
    return size;
  }

  function announceMount(name: string, use: VolumeMountUse): void {
    opts.events.publish('volume', 'mount', name, {
      container: use.container,
      destination: use.destination,
      driver: 'local',
      propagation: use.propagation,
      'read/write': String(use.readWrite),
    });
  }

  function announceUnmount(name: string, containerId: string): void {
    opts.events.publish('volume', 'unmount', name, { container: containerId, driver: 'local' });
  }

  const service: VolumeService = {
    create: (req, o = {}) => lock.run(() => createLocked(req, o.reference)),

    async list(filters) {
      const all = [...volumes.values()].sort((a, b) => a.Name.localeCompare(b.Name)).map(info);
      return { Volumes: filterVolumes(all, filters, (n) => refs.count(n) > 0), Warnings: null };
    },

    async usage() {
      const local = [...volumes.values()]
        .filter((v) => Object.keys(v.Options).length === 0)
        .sort((a, b) => a.Name.localeCompare(b.Name));
      return Promise.all(
        local.map(async (v) => ({
          ...info(v),
          UsageData: { Size: await diskUsage(dataOf(v.Name)), RefCount: refs.count(v.Name) },
        })),
      );
    },

    async inspect(name) {
      return info(getRecord(name));
    },

    remove(name, o = {}) {
      return lock.run(async () => {
        if (!volumes.has(name) && o.force) return;
        await removeLocked(name);
      });
    },

    prune(filters, o) {
      const all = pruneScope(filters, { allNamed: o.allNamed, allFilter: o.allFilter ?? false });
      return lock.run(async () => {
        const deleted: string[] = [];
        let reclaimed = 0;
        for (const v of [...volumes.values()]) {
          if (refs.count(v.Name) > 0) continue;
          if (!all && !Object.hasOwn(v.Labels, ANONYMOUS_LABEL)) continue;
          if (!pruneMatches(info(v), filters)) continue;
          try {
            reclaimed += await removeLocked(v.Name, true);
            deleted.push(v.Name);
          } catch (err) {
            log.warn('prune: cannot remove volume', { name: v.Name, error: errorMessage(err) });
          }
        }
        opts.events.publish('volume', 'prune', '', { reclaimed: String(reclaimed) });
        return { VolumesDeleted: deleted, SpaceReclaimed: reclaimed };
      });
    },

    isAnonymous(name) {
      const v = volumes.get(name);
      return v ? Object.hasOwn(v.Labels, ANONYMOUS_LABEL) : false;
    },

    users: (name) => refs.ids(name),

    reference(name, containerId) {
      getRecord(name);
      refs.add(name, containerId);
    },

    release(name, containerId) {
      refs.delete(name, containerId);
    },

    mount(name, use, o = {}) {
      return lock.run(async () => {
        const v = getRecord(name);
        const target = dataOf(name);
        if (needsMount(v.Options) && !active.has(name, use.container)) {
          if (active.count(name) === 0 && (await ops.mountsUnder(target)).length === 0) {
            await mkdir(target, { recursive: true, mode: 0o755 });
            await ops.mount({ ...mountArgs(v.Options), target }).catch((err) => {
              throw withPrefix(`error while mounting volume '${target}'`, err);
            });
          }
          active.add(name, use.container);
        }
        if (!o.quiet) announceMount(name, use);
        return target;
      });
    },

    unmount(name, containerId, o = {}) {
      return lock.run(async () => {
        const v = volumes.get(name);
        if (!v) return;
        if (needsMount(v.Options) && active.has(name, containerId)) {
          if (active.delete(name, containerId) === 0) await ops.unmount(dataOf(name));
        }
        if (!o.quiet) announceUnmount(name, containerId);
      });
    },

    announceMount,
    announceUnmount,

    populate(name, source) {
      return lock.run(async () => {
        getRecord(name);
        const st = await stat(source).catch(() => undefined);
        if (!st?.isDirectory()) return;
        const target = dataOf(name);
        if ((await readdir(target)).length > 0) return;
        await ops.copyTree(source, target);
      });
    },

    settle() {
      return lock.run(async () => {
        for (const v of volumes.values()) {
          if (!needsMount(v.Options) || active.count(v.Name) > 0) continue;
          if ((await ops.mountsUnder(dataOf(v.Name))).length > 0) {
            await ops
              .unmount(dataOf(v.Name))
              .catch((err) =>
                log.warn('cannot unmount unused volume', { name: v.Name, error: errorMessage(err) }),
              );
          }
        }
      });
    },
  };
  return service;
}
