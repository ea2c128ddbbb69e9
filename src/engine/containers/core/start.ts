import type { ContainerConfig } from '../../../common/docker-types.js';
import type { OciSpec, SpecInput, StartOptions } from '../../runtime/index.js';
import type { Container } from './container.js';
import { namespacePath } from './namespaces.js';
import type { ContainerParts } from './ports.js';
import type { Rootfs } from './rootfs.js';
import type { ContainerSet } from './set.js';

/**
 * What a start needs besides the state machine: the network (namespace, files, links), the
 * namespaces of other containers to join, the mounts, the OCI spec, and the runtime's options.
 */

export type SpecBuilder = (input: SpecInput, options?: { warnings?: string[] }) => Promise<OciSpec>;

export interface StartDeps {
  set: ContainerSet;
  rootfs: Rootfs;
  parts: Pick<ContainerParts, 'net' | 'mounts' | 'logs'>;
  buildSpec: SpecBuilder;
}

/** Spec and start options for a container whose rootfs is mounted at `rootfs`. */
export async function prepareStart(
  d: StartDeps,
  c: Container,
  rootfs: string,
): Promise<Omit<StartOptions, 'beforeStart'>> {
  const rec = c.record;
  const hc = c.hostConfig;
  const net = await d.parts.net.prepare(c);

  const joinNamespaces: SpecInput['joinNamespaces'] = {};
  if (hc.PidMode === 'host') joinNamespaces.pid = 'host';
  else if (hc.PidMode?.startsWith('container:')) {
    joinNamespaces.pid = namespacePath(d.set, hc.PidMode.slice(10), 'pid', 'PID namespace');
  }
  if (hc.IpcMode === 'host') joinNamespaces.ipc = 'host';
  else if (hc.IpcMode?.startsWith('container:')) {
    joinNamespaces.ipc = namespacePath(d.set, hc.IpcMode.slice(10), 'ipc', 'IPC namespace');
  }
  if (hc.UTSMode === 'host') joinNamespaces.uts = 'host';

  const config: ContainerConfig = { ...rec.Config };
  if (net.env) config.Env = net.env;
  if (config.Entrypoint?.length === 1 && config.Entrypoint[0] === '') config.Entrypoint = [];
  const parent = hc.CgroupParent ? hc.CgroupParent.replace(/\/+$/, '') : '/berth';
  const input: SpecInput = {
    id: c.id,
    rootfs,
    config,
    // NetworkDisabled: a new network namespace whatever the mode says; the endpoint's interface
    // sysctls beside the container's own
    hostConfig: {
      ...hc,
      ...(rec.Config.NetworkDisabled ? { NetworkMode: 'none' } : {}),
      ...(net.sysctls ? { Sysctls: { ...(hc.Sysctls ?? {}), ...net.sysctls } } : {}),
    },
    hostsPath: rec.HostsPath,
    hostnamePath: rec.HostnamePath,
    resolvConfPath: rec.ResolvConfPath,
    cgroupsPath: `${parent.startsWith('/') ? parent : `/${parent}`}/${c.id}`,
    mounts: await d.parts.mounts.specMounts(c, rootfs),
    joinNamespaces,
  };
  if (net.netns !== undefined) input.netns = net.netns;
  const spec = await d.buildSpec(input);
  await d.parts.net.ready(c);
  const cs = hc.ConsoleSize;
  return {
    id: c.id,
    bundleDir: d.rootfs.bundlePath(c.id),
    spec,
    ...(hc.Runtime ? { runtime: hc.Runtime } : {}),
    terminal: rec.Config.Tty === true,
    stdin: rec.Config.OpenStdin === true,
    stdinOnce: rec.Config.StdinOnce === true,
    ...d.parts.logs.monitorOptions(c),
    ...(cs && cs[0] > 0 && cs[1] > 0 ? { consoleSize: { height: cs[0], width: cs[1] } } : {}),
  };
}
