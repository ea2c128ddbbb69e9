import { join } from 'node:path';
import { systemError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { commandMounter, type Mounter, prepareHybridForCrun, readCgroupLayout } from './driver/cgroups.js';
import { ConmonDriver } from './driver/conmon.driver.js';
import { OciCli } from './driver/oci-cli.js';
import { lookPath, type ProcessRunner, realProcessRunner } from './driver/process.js';
import { helperCompiler, SeccompBpfCache, type SeccompCompiler } from './driver/seccomp-bpf.js';
import type { Runtime } from './runtime.types.js';

export interface CreateRuntimeOptions {
  name: 'runc' | 'crun';
  /** Runtime state (tmpfs-like, e.g. /run/berth): the runtime's --root, conmon's exit files. */
  execRoot: string;
  /** Persistent data (e.g. /var/lib/berth): per-container monitor records, exit codes, OOM marks. */
  dataRoot: string;
  log: Logger;
  /** Overrides for tests and unusual installs. */
  runtimePath?: string;
  conmonPath?: string;
  runner?: ProcessRunner;
  mounter?: Mounter;
  /**
   * crun: compiles seccomp filters to BPF once (default: the berth-seccomp-bpf helper when it was
   * built; null = let crun compile each container's filter).
   */
  seccompCompiler?: SeccompCompiler | null;
}

/**
 * The runtime driver: runc (default) or crun under conmon. A driver created in a new process finds
 * the containers an earlier one started (live restore).
 */
export async function createRuntime(opts: CreateRuntimeOptions): Promise<Runtime> {
  const runner = opts.runner ?? realProcessRunner;
  const runtimePath = opts.runtimePath ?? (await lookPath(opts.name));
  if (!runtimePath) throw systemError(`OCI runtime ${opts.name} not found on PATH`);
  const conmonPath = opts.conmonPath ?? (await lookPath('conmon'));
  if (!conmonPath) throw systemError('conmon not found on PATH (Debian package conmon)');
  if (opts.name === 'crun') {
    const moved = await prepareHybridForCrun(readCgroupLayout, opts.mounter ?? commandMounter(runner));
    if (moved.length > 0) {
      opts.log.info('mounted cgroup v1 controllers for crun (hybrid cgroups)', { controllers: moved });
    }
  }
  const cli = new OciCli(runtimePath, join(opts.execRoot, opts.name), runner);
  const log = opts.log.child('runtime');
  // runc has no way to take a compiled filter: it compiles the profile at every create
  const compiler =
    opts.name === 'crun'
      ? opts.seccompCompiler === undefined
        ? await helperCompiler()
        : opts.seccompCompiler
      : null;
  if (opts.name === 'crun' && !compiler) {
    log.info('seccomp filters are compiled by crun per container (berth-seccomp-bpf not built)');
  }
  const driver = new ConmonDriver({
    name: opts.name,
    cli,
    conmonPath,
    execRoot: opts.execRoot,
    dataRoot: opts.dataRoot,
    log,
    runner,
    ...(compiler
      ? {
          seccompBpf: new SeccompBpfCache(compiler, (err) =>
            log.warn('compiling a seccomp filter failed: crun compiles it per container', {
              error: err instanceof Error ? err.message : String(err),
            }),
          ),
        }
      : {}),
  });
  await driver.init();
  return driver;
}

export type { SeccompCompiler } from './driver/seccomp-bpf.js';
export * from './logs/index.js';
export { buildExecProcess } from './oci/exec.js';
export {
  type BuildSpecOptions,
  buildResources,
  buildSpec,
  type SeccompProfile,
  specToJson,
} from './oci/index.js';
export { defaultMaskedPaths, defaultReadonlyPaths, defaultShmSize } from './oci/mounts.js';
export type * from './oci/spec.types.js';
export type * from './runtime.types.js';
