import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OciBlockIO } from '../oci/spec.types.js';
import { controllerDirs } from './stats.js';

/**
 * The device limits of a running container's block I/O (docker update, API 1.55), written to its
 * cgroup: `runtime update` of runc 1.1 applies the blkio weight only. What the new limits do not
 * name any more is reset (0, or `max` on cgroup v2), so an empty list clears.
 */
export async function applyBlkioDevices(cgroupsPath: string, blockIO: OciBlockIO | undefined): Promise<void> {
  const io = blockIO ?? {};
  const dirs = await controllerDirs(cgroupsPath.startsWith('/') ? cgroupsPath : `/${cgroupsPath}`);
  if (dirs.v2) return applyV2(dirs.v2, io);
  const dir = dirs.v1('blkio');
  const throttles: Array<[string, Array<{ major: number; minor: number; rate: number }> | undefined]> = [
    ['blkio.throttle.read_bps_device', io.throttleReadBpsDevice],
    ['blkio.throttle.write_bps_device', io.throttleWriteBpsDevice],
    ['blkio.throttle.read_iops_device', io.throttleReadIOPSDevice],
    ['blkio.throttle.write_iops_device', io.throttleWriteIOPSDevice],
  ];
  for (const [file, wanted] of throttles) {
    await setDeviceFile(
      join(dir, file),
      (wanted ?? []).map((d) => [`${d.major}:${d.minor}`, String(d.rate)]),
      '0',
    );
  }
  const weights = (io.weightDevice ?? []).map((d): [string, string] => [
    `${d.major}:${d.minor}`,
    String(d.weight),
  ]);
  // the weight file is not there with every I/O scheduler: nothing to keep then
  await setDeviceFile(join(dir, 'blkio.weight_device'), weights, '0').catch(() => undefined);
}

/** One `MAJ:MIN value` file of cgroup v1: the wanted lines written, the others reset. */
async function setDeviceFile(path: string, wanted: Array<[string, string]>, reset: string): Promise<void> {
  const current = (await readFile(path, 'utf8').catch(() => ''))
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((d) => /^\d+:\d+$/.test(d));
  const keep = new Set(wanted.map(([d]) => d));
  for (const d of current) if (!keep.has(d)) await writeFile(path, `${d} ${reset}`);
  for (const [d, v] of wanted) await writeFile(path, `${d} ${v}`);
}

/** cgroup v2: io.max lines `MAJ:MIN rbps=N wbps=N riops=N wiops=N` (`max`: no limit). */
async function applyV2(dir: string, io: OciBlockIO): Promise<void> {
  const lines = new Map<string, Record<string, string>>();
  const put = (list: Array<{ major: number; minor: number; rate: number }> | undefined, key: string) => {
    for (const d of list ?? []) {
      const k = `${d.major}:${d.minor}`;
      lines.set(k, {
        ...(lines.get(k) ?? { rbps: 'max', wbps: 'max', riops: 'max', wiops: 'max' }),
        [key]: String(d.rate),
      });
    }
  };
  put(io.throttleReadBpsDevice, 'rbps');
  put(io.throttleWriteBpsDevice, 'wbps');
  put(io.throttleReadIOPSDevice, 'riops');
  put(io.throttleWriteIOPSDevice, 'wiops');
  const path = join(dir, 'io.max');
  const current = (await readFile(path, 'utf8').catch(() => ''))
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((d) => /^\d+:\d+$/.test(d));
  for (const d of current) {
    if (!lines.has(d)) await writeFile(path, `${d} rbps=max wbps=max riops=max wiops=max`);
  }
  for (const [d, v] of lines) {
    await writeFile(
      path,
      `${d} ${Object.entries(v)
        .map(([k, x]) => `${k}=${x}`)
        .join(' ')}`,
    );
  }
}
