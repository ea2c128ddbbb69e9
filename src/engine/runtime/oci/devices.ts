import type { HostConfig } from '../../../common/docker-types.js';
import { errnoCode, invalidParameter } from '../../../common/errors.js';
import type { DeviceNode, SpecHost } from './host.js';
import type { OciDeviceRule } from './spec.types.js';

/** A device cgroup rule (linux.resources.devices). */
export type DeviceCgroupRule = OciDeviceRule;

/** moby's default device cgroup rules: deny all, allow null/zero/full/random/urandom/tty/console, deny fuse. */
export function defaultDeviceRules(): DeviceCgroupRule[] {
  const allow = (major: number, minor: number): DeviceCgroupRule => ({
    allow: true,
    type: 'c',
    major,
    minor,
    access: 'rwm',
  });
  return [
    { allow: false, access: 'rwm' },
    allow(1, 5),
    allow(1, 3),
    allow(1, 9),
    allow(1, 8),
    allow(5, 0),
    allow(5, 1),
    { allow: false, type: 'c', major: 10, minor: 229, access: 'rwm' },
  ];
}

const ruleRe = /^([acb]) ([0-9]+|\*):([0-9]+|\*) ([rwm]{1,3})$/;

/** Parse a DeviceCgroupRules entry such as `c 1:3 mr` or `a *:* rwm`. */
export function parseDeviceCgroupRule(rule: string): DeviceCgroupRule {
  const m = ruleRe.exec(rule);
  if (!m) throw invalidParameter(`invalid device cgroup rule format: '${rule}'`);
  const out: DeviceCgroupRule = { allow: true, type: m[1] as 'a' | 'c' | 'b', access: m[4]! };
  if (m[2] !== '*') out.major = Number(m[2]);
  if (m[3] !== '*') out.minor = Number(m[3]);
  return out;
}

function validPermissions(p: string): boolean {
  return p.length > 0 && p.length <= 3 && /^[rwm]+$/.test(p) && new Set(p).size === p.length;
}

/**
 * The devices of a HostConfig.Devices entry: the node at PathOnHost, or every node below it when
 * it is a directory (paths mapped under PathInContainer), as moby's DevicesFromPath.
 */
export async function devicesFromPath(
  host: SpecHost,
  pathOnHost: string,
  pathInContainer: string,
  permissions: string,
): Promise<{ devices: DeviceNode[]; rules: DeviceCgroupRule[] }> {
  const perms = permissions || 'rwm';
  if (!validPermissions(perms)) throw invalidParameter(`invalid device cgroup permissions: ${permissions}`);
  const target = pathInContainer || pathOnHost;
  let node: DeviceNode | null;
  try {
    node = await host.statDevice(pathOnHost);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') {
      throw invalidParameter(
        `error gathering device information while adding custom device "${pathOnHost}": no such file or directory`,
      );
    }
    throw err;
  }
  const devices: DeviceNode[] = [];
  if (node) devices.push({ ...node, path: target });
  else {
    for (const p of await host.listDevices(pathOnHost)) {
      const d = await host.statDevice(p);
      if (!d) continue;
      devices.push({ ...d, path: target + p.slice(pathOnHost.replace(/\/+$/, '').length) });
    }
    if (devices.length === 0) {
      throw invalidParameter(
        `error gathering device information while adding custom device "${pathOnHost}": not a device node`,
      );
    }
  }
  const rules = devices
    .filter((d) => d.type !== 'p')
    .map((d) => ({ allow: true, type: d.type as 'c' | 'b', major: d.major, minor: d.minor, access: perms }));
  return { devices, rules };
}

/** linux.devices and the device cgroup rules (linux.resources.devices). */
export async function planDevices(
  hc: HostConfig,
  host: SpecHost,
): Promise<{ devices: DeviceNode[]; rules: DeviceCgroupRule[] }> {
  const devices: DeviceNode[] = [];
  if (hc.Privileged) {
    devices.push(...(await host.hostDevices()));
    for (const d of hc.Devices ?? []) {
      if (d.PathOnHost === d.PathInContainer) continue;
      devices.push(...(await devicesFromPath(host, d.PathOnHost, d.PathInContainer, 'rwm')).devices);
    }
    return { devices, rules: [{ allow: true, access: 'rwm' }] };
  }
  const rules = defaultDeviceRules();
  for (const d of hc.Devices ?? []) {
    const r = await devicesFromPath(host, d.PathOnHost, d.PathInContainer, d.CgroupPermissions);
    devices.push(...r.devices);
    rules.push(...r.rules);
  }
  for (const rule of hc.DeviceCgroupRules ?? []) rules.push(parseDeviceCgroupRule(rule));
  return { devices, rules };
}
