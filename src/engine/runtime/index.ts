import { join } from 'node:path';
import { errorMessage, systemError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { commandMounter, type Mounter, prepareHybridForCrun, readCgroupLayout } from './driver/cgroups.js';
import { ConmonDriver, type RuntimeEntry } from './driver/conmon.driver.js';
import { OciCli } from './driver/oci-cli.js';
import { lookPath, type ProcessRunner, realProcessRunner } from './driver/process.js';
import {
  helperCompiler,
  SeccompBpfCache,
  type SeccompCompiler,
  seccompCacheSalt,
} from './driver/seccomp-bpf.js';
import type { Runtime } from './runtime.types.js';

export interface CreateRuntimeOptions {
  /**
   * The default runtime (containers without HostConfig.Runtime). Undefined: crun where it runs on
   * this host (hybrid cgroups prepared as below), else runc.
   */
  name?: 'runc' | 'crun';
  /** Runtime state (tmpfs-like, e.g. /run/berth): the runtime's --root, conmon's exit files. */
  execRoot: string;
  /** Persistent data (e.g. /var/lib/berth): per-container monitor records, exit codes, OOM marks. */
  dataRoot: string;
  log: Logger;
  /** Overrides for tests and unusual installs: the default runtime's path, conmon's. */
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

const runtimeNames = ['runc', 'crun'] as const;

/**
 * The runtime driver: containers run with crun or runc under conmon, the default one or the one a
 * container names. A driver created in a new process finds the containers an earlier one started
 * (live restore), each with the runtime it was started with.
 */
export async function createRuntime(opts: CreateRuntimeOptions): Promise<Runtime> {
  const runner = opts.runner ?? realProcessRunner;
  const log = opts.log.child('runtime');
  const conmonPath = opts.conmonPath ?? (await lookPath('conmon'));
  if (!conmonPath) throw systemError('conmon not found on PATH (Debian package conmon)');
  const paths = new Map<string, string>();
  for (const n of runtimeNames) {
    const path = opts.runtimePath && n === opts.name ? opts.runtimePath : await lookPath(n);
    if (path) paths.set(n, path);
  }
  // crun refuses hybrid cgroups while a controller sits on v2: moved to v1 once, before crun runs
  let crunReady: Promise<void> | undefined;
  const prepareCrun = () => {
    crunReady ??= prepareHybridForCrun(readCgroupLayout, opts.mounter ?? commandMounter(runner)).then(
      (moved) => {
        if (moved.length > 0)
          log.info('mounted cgroup v1 controllers for crun (hybrid cgroups)', { controllers: moved });
      },
    );
    return crunReady;
  };
  let name = opts.name;
  if (!name) {
    name = 'runc';
    if (paths.has('crun')) {
      try {
        await prepareCrun();
        name = 'crun';
      } catch (err) {
        log.warn('crun cannot run containers on this host: the default runtime is runc', {
          error: errorMessage(err),
        });
      }
    }
  }
  if (!paths.has(name)) throw systemError(`OCI runtime ${name} not found on PATH`);
  if (name === 'crun') await prepareCrun();

  const runtimes = new Map<string, RuntimeEntry>();
  for (const [n, path] of paths) {
    const cli = new OciCli(path, join(opts.execRoot, n), runner);
    if (n !== 'crun') {
      // runc has no way to take a compiled filter: it compiles the profile at every create
      runtimes.set(n, { cli });
      continue;
    }
    const compiler = opts.seccompCompiler === undefined ? await helperCompiler() : opts.seccompCompiler;
    if (!compiler)
      log.info('seccomp filters are compiled by crun per container (berth-seccomp-bpf not built)');
    runtimes.set(n, {
      cli,
      prepare: prepareCrun,
      ...(compiler
        ? {
            seccompBpf: new SeccompBpfCache(
              compiler,
              (err) =>
                log.warn('compiling a seccomp filter failed: crun compiles it per container', {
                  error: errorMessage(err),
                }),
              {
                dir: join(opts.dataRoot, 'runtime', 'seccomp'),
                salt: () => seccompCacheSalt(() => cli.version()),
              },
            ),
          }
        : {}),
    });
  }
  const driver = new ConmonDriver({
    name,
    runtimes,
    conmonPath,
    execRoot: opts.execRoot,
    dataRoot: opts.dataRoot,
    log,
    runner,
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
