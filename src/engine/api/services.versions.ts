import type { ServiceSpec } from '../swarm/services/service.types.js';
import { versionBefore } from './versions.js';

/**
 * A ServiceSpec without the fields too new for the request's API version, as moby's
 * adjustForAPIVersion drops them (from create and update bodies, and from what reads show):
 * below 1.40 Sysctls, MaxReplicas, the config Runtime target and CredentialSpec.Config; below
 * 1.41 capabilities, Ulimits, Limits.Pids and the job modes; below 1.44 seccomp, apparmor,
 * no-new-privileges and Healthcheck.StartInterval; below 1.46 OomScoreAdj and tmpfs Options.
 * Returns a new spec; the one given is not changed.
 */
export const serviceGates = {
  sysctlsMaxReplicas: '1.40',
  capabilitiesJobs: '1.41',
  privilegesStartInterval: '1.44',
  oomScoreTmpfsOptions: '1.46',
  /** GET /services?status=true: ServiceStatus. */
  serviceStatus: '1.41',
} as const;

export function specForVersion(spec: ServiceSpec, version: string): ServiceSpec {
  if (!versionBefore(version, serviceGates.oomScoreTmpfsOptions)) return spec;
  const out: ServiceSpec = structuredClone(spec);
  const c = out.TaskTemplate?.ContainerSpec;
  const before = (v: string) => versionBefore(version, v);
  if (before(serviceGates.sysctlsMaxReplicas)) {
    if (c) {
      delete c.Sysctls;
      if (c.Privileges?.CredentialSpec) c.Privileges.CredentialSpec.Config = '';
      for (const ref of c.Configs ?? []) delete ref.Runtime;
    }
    if (out.TaskTemplate?.Placement) delete out.TaskTemplate.Placement.MaxReplicas;
  }
  if (before(serviceGates.capabilitiesJobs)) {
    if (c) {
      delete c.CapabilityAdd;
      delete c.CapabilityDrop;
      delete c.Ulimits;
    }
    if (out.TaskTemplate?.Resources?.Limits) delete out.TaskTemplate.Resources.Limits.Pids;
    if (out.Mode) {
      delete out.Mode.ReplicatedJob;
      delete out.Mode.GlobalJob;
    }
  }
  if (before(serviceGates.privilegesStartInterval)) {
    if (c?.Privileges) {
      delete c.Privileges.Seccomp;
      delete c.Privileges.AppArmor;
      delete c.Privileges.NoNewPrivileges;
    }
    if (c?.Healthcheck) delete c.Healthcheck.StartInterval;
  }
  if (c) {
    delete c.OomScoreAdj;
    for (const m of c.Mounts ?? []) if (m.TmpfsOptions) delete m.TmpfsOptions.Options;
  }
  return out;
}
