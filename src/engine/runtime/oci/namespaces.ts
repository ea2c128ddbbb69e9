import type { HostConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import type { SpecInput } from '../runtime.types.js';
import type { OciNamespace } from './spec.types.js';

export type Namespace = OciNamespace;

/** How the container relates to the host's namespaces; other modules decide from this. */
export interface NamespacePlan {
  namespaces: Namespace[];
  hostNetwork: boolean;
  hostIpc: boolean;
  hostPid: boolean;
  hostUts: boolean;
  /** A network namespace of its own or joined (not the host's). */
  privateNetwork: boolean;
  /** An IPC namespace that is not the host's (new or joined). */
  privateIpc: boolean;
}

const modeOf = (m: string | undefined) => (m ?? '').trim();

function join(
  type: 'pid' | 'ipc' | 'uts',
  mode: string,
  given: string | undefined,
): { ns: Namespace | null; host: boolean } {
  if (given === 'host') return { ns: null, host: true };
  if (given) return { ns: { type, path: given }, host: false };
  if (mode === 'host') return { ns: null, host: true };
  if (mode.startsWith('container:')) {
    throw invalidParameter(`${type} mode ${mode}: the namespace path of that container is required`);
  }
  return { ns: { type }, host: false };
}

/** The namespaces of the spec, in dockerd's order (mount, network, uts, pid, ipc[, cgroup]). */
export function planNamespaces(
  input: Pick<SpecInput, 'netns' | 'joinNamespaces' | 'hostConfig'>,
): NamespacePlan {
  const hc: HostConfig = input.hostConfig;
  const namespaces: Namespace[] = [{ type: 'mount' }];

  const networkMode = modeOf(hc.NetworkMode);
  let hostNetwork = false;
  if (input.netns === 'host' || (input.netns === undefined && networkMode === 'host')) hostNetwork = true;
  else if (input.netns) namespaces.push({ type: 'network', path: input.netns });
  else if (networkMode.startsWith('container:')) {
    throw invalidParameter(`network mode ${networkMode}: the namespace path of that container is required`);
  } else namespaces.push({ type: 'network' });

  const uts = join('uts', modeOf(hc.UTSMode), input.joinNamespaces?.uts);
  if (uts.ns) namespaces.push(uts.ns);
  const pid = join('pid', modeOf(hc.PidMode), input.joinNamespaces?.pid);
  if (pid.ns) namespaces.push(pid.ns);

  const ipcMode = modeOf(hc.IpcMode);
  if (!['', 'private', 'shareable', 'none', 'host'].includes(ipcMode) && !ipcMode.startsWith('container:')) {
    throw invalidParameter(`invalid IPC mode: ${ipcMode}`);
  }
  const ipc = join('ipc', ipcMode, input.joinNamespaces?.ipc);
  if (ipc.ns) namespaces.push(ipc.ns);

  const cgroupns = modeOf(hc.CgroupnsMode);
  if (!['', 'host', 'private'].includes(cgroupns)) {
    throw invalidParameter(`invalid cgroup namespace mode: ${cgroupns}`);
  }
  if (cgroupns === 'private') namespaces.push({ type: 'cgroup' });

  return {
    namespaces,
    hostNetwork,
    hostIpc: ipc.host,
    hostPid: pid.host,
    hostUts: uts.host,
    privateNetwork: !hostNetwork,
    privateIpc: !ipc.host,
  };
}

const ipcSysctls = new Set([
  'kernel.msgmax',
  'kernel.msgmnb',
  'kernel.msgmni',
  'kernel.sem',
  'kernel.shmall',
  'kernel.shmmax',
  'kernel.shmmni',
  'kernel.shm_rmid_forced',
]);

/** Refuse sysctls that would change the host (runc's rules, checked before runc sees them). */
export function validateSysctls(sysctls: Record<string, string>, plan: NamespacePlan): void {
  for (const name of Object.keys(sysctls)) {
    if (ipcSysctls.has(name) || name.startsWith('fs.mqueue.')) {
      if (plan.privateIpc) continue;
      throw invalidParameter(`sysctl "${name}" is not allowed in the host's IPC namespace`);
    }
    if (name.startsWith('net.')) {
      if (plan.privateNetwork) continue;
      throw invalidParameter(`sysctl "${name}" is not allowed in the host's network namespace`);
    }
    if (!plan.hostUts && name === 'kernel.domainname') continue;
    if (name === 'kernel.hostname') {
      throw invalidParameter(`sysctl "${name}" is not allowed: set the container's hostname instead`);
    }
    throw invalidParameter(`sysctl "${name}" is not in a separate kernel namespace`);
  }
}
