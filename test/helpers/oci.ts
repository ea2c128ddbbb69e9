import type { OciLinux, OciProcess, OciSpec } from '../../src/engine/runtime/oci/spec.types.js';

/** A complete, minimal OCI spec for tests that run or fake a container; parts replaced as given. */
export function ociSpec(
  over: { process?: Partial<OciProcess>; linux?: Partial<OciLinux>; root?: string } = {},
): OciSpec {
  return {
    ociVersion: '1.0.2-dev',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: ['true'],
      env: [],
      cwd: '/',
      capabilities: { bounding: [] },
      rlimits: [],
      noNewPrivileges: false,
      ...over.process,
    },
    root: { path: over.root ?? '/nonexistent', readonly: false },
    hostname: '',
    mounts: [],
    linux: {
      sysctl: {},
      resources: {},
      cgroupsPath: '',
      namespaces: [],
      devices: [],
      maskedPaths: [],
      readonlyPaths: [],
      ...over.linux,
    },
  };
}
