import { existsSync } from 'node:fs';
import { isAbsolute, posix } from 'node:path';
import type { HostConfig, MountSpec } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';

/** Create-time checks of binds, Mounts, Tmpfs and their mount points, with dockerd's messages. */
/**
 * `host-src:container-dest[:mode]` / `volume:container-dest[:mode]` / `container-dest` (an
 * anonymous volume: kind `volume`, source '').
 */
export interface ParsedBind {
  source: string;
  destination: string;
  readOnly: boolean;
  mode: string;
  propagation: string;
  kind: 'bind' | 'volume';
}

export const RW_MODES = new Set(['ro', 'rw']);
export const LABEL_MODES = new Set(['z', 'Z']);
export const PROPAGATIONS = new Set(['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave']);
export const COPY_MODES = new Set(['nocopy']);
export const CONSISTENCY_MODES = new Set(['consistent', 'cached', 'delegated']);
export const MODE_KINDS = [RW_MODES, LABEL_MODES, PROPAGATIONS, COPY_MODES, CONSISTENCY_MODES];

/** Every option of `mode` known (dockerd's linuxValidMountMode without its one-of-each rule). */
export function knownMode(mode: string): boolean {
  return mode === '' || mode.split(',').every((o) => MODE_KINDS.some((k) => k.has(o)));
}

/** dockerd's linuxValidMountMode: known options, at most one of each kind. */
export function validMode(mode: string): boolean {
  if (!knownMode(mode)) return false;
  const opts = mode === '' ? [] : mode.split(',');
  return MODE_KINDS.every((kind) => opts.filter((o) => kind.has(o)).length <= 1);
}

/** Go's path.Clean (posix.normalize keeps a trailing slash). */
export function clean(p: string): string {
  const c = posix.normalize(p);
  return c.length > 1 && c.endsWith('/') ? c.slice(0, -1) : c;
}

/** Mount target checks shared by binds and Mounts (linuxValidateNotRoot, linuxValidateAbsolute). */
export function targetError(target: string): string | undefined {
  if (target === '') return 'field Target must not be empty';
  if (clean(target.replaceAll('\\', '/')) === '/') {
    return "invalid specification: destination can't be '/'";
  }
  if (!isAbsolute(target.replaceAll('\\', '/'))) {
    return `invalid mount path: '${target}' mount path must be absolute`;
  }
  return undefined;
}

/** Parse a bind as dockerd's linux ParseMountRaw does (messages included). */
export function parseBind(spec: string): ParsedBind {
  const invalidSpec = `invalid volume specification: '${spec}'`;
  const parts = spec.split(':');
  if (parts.length > 3 || parts[0] === '') throw invalidParameter(invalidSpec);
  let source = '';
  let destination: string;
  let mode = '';
  if (parts.length === 1) destination = spec;
  else {
    // `/dst:ro` is a destination and a mode: an anonymous volume cannot take a mode
    if (parts.length === 2 && knownMode(parts[1] ?? '')) throw invalidParameter(invalidSpec);
    [source = '', destination = '', mode = ''] = parts;
  }
  if (!knownMode(mode)) throw invalidParameter(`invalid mode: ${mode}`);
  const kind = source.startsWith('/') ? 'bind' : 'volume';
  const bad = targetError(destination);
  if (bad) throw invalidParameter(`${invalidSpec}: invalid mount config for type "${kind}": ${bad}`);
  if (kind === 'volume' && source !== '' && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(source)) {
    throw invalidParameter(
      `${invalidSpec}: "${source}" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path`,
    );
  }
  const modes = mode === '' ? [] : mode.split(',');
  const propagation = modes.find((m) => PROPAGATIONS.has(m)) ?? '';
  return { source, destination, readOnly: modes.includes('ro'), mode, propagation, kind };
}

/**
 * A bind given at create: parsed, plus what dockerd also refuses there but stored binds are not
 * held to (one option of each kind; `nocopy` on a bind, a propagation on a volume).
 */
export function checkBind(spec: string): ParsedBind {
  const p = parseBind(spec);
  if (!validMode(p.mode)) throw invalidParameter(`invalid mode: ${p.mode}`);
  const modes = p.mode === '' ? [] : p.mode.split(',');
  const what = `invalid volume specification: '${spec}': invalid mount config for type "${p.kind}"`;
  if (p.kind === 'bind' && modes.includes('nocopy')) {
    throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
  }
  if (p.kind === 'volume' && p.propagation) {
    throw invalidParameter(`${what}: field BindOptions must not be specified`);
  }
  return p;
}

/** HostConfig.Mounts as dockerd's linux validateMountConfigImpl checks them. */
export function checkMounts(mounts: (MountSpec | null)[]): void {
  const seen = new Set<string>();
  for (const m of mounts) {
    if (!m || typeof m !== 'object') throw invalidParameter('invalid mount config: expected an object');
    const what = `invalid mount config for type "${m.Type ?? ''}"`;
    const target = m.Target ?? '';
    const bad = targetError(target);
    if (bad) throw invalidParameter(`${what}: ${bad}`);
    if (m.Type !== 'image' && m.ImageOptions) {
      throw invalidParameter(`${what}: field ImageOptions must not be specified`);
    }
    switch (m.Type) {
      case 'bind': {
        if (!m.Source) throw invalidParameter(`${what}: field Source must not be empty`);
        const prop = m.BindOptions?.Propagation;
        if (prop && !PROPAGATIONS.has(prop))
          throw invalidParameter(`${what}: invalid propagation mode: ${prop}`);
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        if (m.TmpfsOptions) throw invalidParameter(`${what}: field TmpfsOptions must not be specified`);
        if (!isAbsolute(m.Source))
          throw invalidParameter(`${what}: invalid mount path: '${m.Source}' mount path must be absolute`);
        if (!existsSync(m.Source) && !m.BindOptions?.CreateMountpoint) {
          throw invalidParameter(`${what}: bind source path does not exist: ${m.Source}`);
        }
        break;
      }
      case 'volume':
        if (m.BindOptions) throw invalidParameter(`${what}: field BindOptions must not be specified`);
        if (m.TmpfsOptions) throw invalidParameter(`${what}: field TmpfsOptions must not be specified`);
        if (!m.Source && m.ReadOnly) {
          throw invalidParameter(`${what}: must not set ReadOnly mode when using anonymous volumes`);
        }
        if (m.Source && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(m.Source)) {
          throw invalidParameter(
            `${what}: invalid volume name: "${m.Source}" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed`,
          );
        }
        if (m.VolumeOptions?.Subpath && !isLocalPath(m.VolumeOptions.Subpath)) {
          throw invalidParameter(`${what}: subpath must be a relative path within the volume`);
        }
        break;
      case 'tmpfs':
        if (m.BindOptions) throw invalidParameter(`${what}: field BindOptions must not be specified`);
        if (m.Source) throw invalidParameter(`${what}: field Source must not be specified`);
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        tmpfsExtraOptions(m.TmpfsOptions?.Options, what);
        break;
      case 'image':
        if (!m.Source) throw invalidParameter(`${what}: field Source must not be empty`);
        if (m.BindOptions) throw invalidParameter(`${what}: field BindOptions must not be specified`);
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        if (m.TmpfsOptions) throw invalidParameter(`${what}: field TmpfsOptions must not be specified`);
        if (m.ImageOptions?.Subpath && !isLocalPath(m.ImageOptions.Subpath)) {
          throw invalidParameter(`${what}: subpath must be a relative path within the volume`);
        }
        break;
      default:
        throw invalidParameter(`${what}: mount type unknown`);
    }
    const dest = clean(target);
    if (seen.has(dest)) throw invalidParameter(`Duplicate mount point: ${target}`);
    seen.add(dest);
  }
}

/** Go's filepath.IsLocal: relative, not empty, never leaving its root through `..`. */
export function isLocalPath(p: string): boolean {
  if (p === '' || p.startsWith('/')) return false;
  const c = posix.normalize(p);
  return c !== '..' && !c.startsWith('../');
}

/** A tmpfs Mount's extra options (API 1.46): [name] or [name, value], exec and noexec only. */
export function tmpfsExtraOptions(
  options: string[][] | null | undefined,
  what = 'invalid mount config',
): string[] {
  const out: string[] = [];
  for (const opt of options ?? []) {
    if (!Array.isArray(opt) || opt.length < 1 || opt.length > 2) {
      throw invalidParameter(`${what}: invalid option array length`);
    }
    const [name = '', value] = opt;
    if (name !== 'exec' && name !== 'noexec') throw invalidParameter(`${what}: invalid option: ${name}`);
    out.push(value === undefined ? name : `${name}=${value}`);
  }
  return out;
}

/**
 * HostConfig.Tmpfs destinations (ValidateTmpfsMountDestination), then the duplicate mount points
 * dockerd's registerMountPoints refuses: a bind over another bind or a Tmpfs entry, a mount over
 * a bind or an earlier mount.
 */
export function checkMountPoints(hc: HostConfig): void {
  const tmpfs = hc.Tmpfs ?? {};
  for (const dest of Object.keys(tmpfs)) {
    if (clean(dest.replaceAll('\\', '/')) === '/') {
      throw invalidParameter("invalid specification: destination can't be '/'");
    }
    if (!isAbsolute(dest))
      throw invalidParameter(`invalid mount path: '${dest}' mount path must be absolute`);
  }
  const taken = new Set<string>();
  for (const b of hc.Binds ?? []) {
    if (typeof b !== 'string') throw invalidParameter('invalid volume specification: binds must be strings');
    const dest = clean(checkBind(b).destination);
    if (taken.has(dest) || Object.hasOwn(tmpfs, dest))
      throw invalidParameter(`Duplicate mount point: ${dest}`);
    taken.add(dest);
  }
  for (const m of hc.Mounts ?? []) {
    const dest = clean(m?.Target ?? '');
    if (taken.has(dest)) throw invalidParameter(`Duplicate mount point: ${m?.Target ?? ''}`);
  }
}
