import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import type { HostConfig } from '../../../common/docker-types.js';
import type { SpecMount } from '../../runtime/runtime.types.js';
import { parseBind, tmpfsExtraOptions } from '../core/mounts.validate.js';

/**
 * The runtime mounts of HostConfig's binds, bind and tmpfs Mounts and Tmpfs (volumes and image
 * mounts: volumes.ts). A read-only bind is read-only all the way down (its submounts too: `rro`,
 * as dockerd 25+ on kernels that can), unless the container was made before API 1.44
 * (`readOnlyNonRecursive`) or the Mount asks for BindOptions.ReadOnlyNonRecursive.
 */
export function bindMounts(hc: HostConfig, o: { readOnlyNonRecursive: boolean }): SpecMount[] {
  const out: SpecMount[] = [];
  const readOnly = (nonRecursive: boolean) => (nonRecursive ? ['ro'] : ['ro', 'rro']);
  for (const b of hc.Binds ?? []) {
    const p = parseBind(b);
    if (p.kind === 'volume') continue; // a volume: one of the record's MountPoints
    const opts = ['rbind', ...(p.readOnly ? readOnly(o.readOnlyNonRecursive) : ['rw'])];
    if (p.propagation) opts.push(p.propagation);
    out.push({ destination: p.destination, type: 'bind', source: p.source, options: opts });
  }
  for (const m of hc.Mounts ?? []) {
    if (m.Type === 'bind') {
      const b = m.BindOptions;
      const nonRecursive =
        !b?.ReadOnlyForceRecursive &&
        (o.readOnlyNonRecursive || b?.ReadOnlyNonRecursive === true || b?.NonRecursive === true);
      const opts = [b?.NonRecursive ? 'bind' : 'rbind', ...(m.ReadOnly ? readOnly(nonRecursive) : ['rw'])];
      if (b?.Propagation) opts.push(b.Propagation);
      out.push({ destination: m.Target ?? '', type: 'bind', source: m.Source ?? '', options: opts });
    } else if (m.Type === 'tmpfs') {
      const opts = ['nosuid', 'nodev', 'noexec'];
      if (m.ReadOnly) opts.push('ro');
      if (m.TmpfsOptions?.SizeBytes) opts.push(`size=${m.TmpfsOptions.SizeBytes}`);
      if (m.TmpfsOptions?.Mode) opts.push(`mode=${m.TmpfsOptions.Mode.toString(8)}`);
      opts.push(...tmpfsExtraOptions(m.TmpfsOptions?.Options));
      out.push({ destination: m.Target ?? '', type: 'tmpfs', source: 'tmpfs', options: opts });
    }
  }
  for (const [dest, options] of Object.entries(hc.Tmpfs ?? {})) {
    const opts = ['nosuid', 'nodev', 'noexec', ...(options ? options.split(',').filter(Boolean) : [])];
    out.push({ destination: dest, type: 'tmpfs', source: 'tmpfs', options: opts });
  }
  return out;
}

/** Create missing bind sources (dockerd does for -v host paths). */
export async function ensureBindSources(hc: HostConfig): Promise<void> {
  for (const b of hc.Binds ?? []) {
    const p = parseBind(b);
    if (p.kind === 'bind' && !existsSync(p.source)) await mkdir(p.source, { recursive: true });
  }
  for (const m of hc.Mounts ?? []) {
    if (m.Type === 'bind' && m.Source && m.BindOptions?.CreateMountpoint && !existsSync(m.Source)) {
      await mkdir(m.Source, { recursive: true });
    }
  }
}
