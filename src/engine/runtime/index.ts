import { join } from 'node:path';
import { systemError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { commandMounter, type Mounter, prepareHybridForCrun, readCgroupLayout } from './driver/cgroups.js';
import { ConmonDriver } from './driver/conmon.driver.js';
import { OciCli } from './driver/oci-cli.js';
import { lookPath, type ProcessRunner, realProcessRunner } from './driver/process.js';
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
  const driver = new ConmonDriver({
    name: opts.name,
    cli,
    conmonPath,
    execRoot: opts.execRoot,
    dataRoot: opts.dataRoot,
    log: opts.log.child('runtime'),
    runner,
  });
  await driver.init();
  return driver;
}

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
