/**
 * The machine's floor for one run cycle: an overlay mount of the busybox rootfs, `crun run` of
 * `true` in a bundle made by berth's own spec code (Docker's default seccomp profile, precompiled as
 * berth hands it to crun; no network: a new empty namespace, as `--network none`), and the
 * unmount. Mount and unmount are system calls through berth-sys; crun runs in the foreground.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ContainerConfig, HostConfig } from '../../src/common/docker-types.js';
import { type SysHelper, sysHelper } from '../../src/common/host/sys-helper.js';
import { buildBusyboxRootfs } from '../../src/engine/images/seed.js';
import { fileBindsForCrun, mountsForCrun } from '../../src/engine/runtime/driver/crun-compat.js';
import { lookPath } from '../../src/engine/runtime/driver/process.js';
import {
  helperCompiler,
  SeccompBpfCache,
  seccompBpfAnnotation,
} from '../../src/engine/runtime/driver/seccomp-bpf.js';
import { buildSpec, specToJson } from '../../src/engine/runtime/index.js';

export interface Floor {
  /** One mount + `crun run` + umount; resolves with its duration in ms. */
  cycle(): Promise<number>;
  /**
   * One bare `crun exec` of `true` in a running container of the same kind of bundle (its
   * seccomp filter precompiled, as berth's exec): the exec round trip's floor; ms.
   */
  exec(): Promise<number>;
  close(): Promise<void>;
}

const run = (file: string, args: string[]): Promise<number> =>
  new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', (code) => resolve(code ?? 1));
  });

export async function startFloor(): Promise<Floor> {
  const sys: SysHelper | null = sysHelper();
  if (!sys) throw new Error('the floor needs berth-sys: npm run build');
  const crun = await lookPath('crun');
  if (!crun) throw new Error('the floor needs crun');
  const dir = await mkdtemp(join(tmpdir(), 'berth-floor-'));
  const lower = join(dir, 'lower');
  const merged = join(dir, 'merged');
  const state = join(dir, 'state');
  await Promise.all([lower, merged, state].map((d) => mkdir(d, { recursive: true })));
  // the rootfs berth seeds, unpacked once
  await new Promise<void>((resolve, reject) => {
    void buildBusyboxRootfs().then((tar) => {
      const child = spawn('tar', ['-x', '-f', '-', '-C', lower], { stdio: ['pipe', 'ignore', 'inherit'] });
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar exited ${code}`))));
      Readable.from([tar]).pipe(child.stdin);
    }, reject);
  });
  for (const f of ['hosts', 'hostname', 'resolv.conf']) await writeFile(join(dir, f), '');
  const config: ContainerConfig = { Image: 'busybox', Cmd: ['true'], Env: ['PATH=/bin'] } as ContainerConfig;
  const hostConfig: HostConfig = { NetworkMode: 'none' } as HostConfig;
  const spec = await buildSpec({
    id: 'floor',
    rootfs: merged,
    config,
    hostConfig,
    hostsPath: join(dir, 'hosts'),
    hostnamePath: join(dir, 'hostname'),
    resolvConfPath: join(dir, 'resolv.conf'),
    // crun removes the container's cgroups when it ends; /berth is the engine's own parent
    cgroupsPath: '/berth/berth-floor',
    mounts: [],
  });
  spec.mounts = await fileBindsForCrun({ ...spec, mounts: mountsForCrun(spec.mounts) });
  const compiler = await helperCompiler();
  const bpf =
    compiler && spec.linux?.seccomp ? await new SeccompBpfCache(compiler).bpf(spec.linux.seccomp) : null;
  if (bpf) spec.annotations = { ...spec.annotations, [seccompBpfAnnotation]: bpf };
  await writeFile(join(dir, 'config.json'), specToJson(spec));
  // the exec floor's container: the same bundle running `sleep`, on a mount of its own
  const sleeperDir = join(dir, 'sleeper');
  const sleeperRoot = join(sleeperDir, 'rootfs');
  await mkdir(join(sleeperDir, 'up'), { recursive: true });
  await Promise.all([mkdir(join(sleeperDir, 'work')), mkdir(sleeperRoot)]);
  await sys.mount({
    source: 'overlay',
    fstype: 'overlay',
    target: sleeperRoot,
    data: `lowerdir=${lower},upperdir=${join(sleeperDir, 'up')},workdir=${join(sleeperDir, 'work')}`,
  });
  const sleeperSpec = {
    ...spec,
    root: { ...spec.root, path: sleeperRoot },
    process: { ...spec.process, args: ['sleep', '100000'] },
    linux: { ...spec.linux, cgroupsPath: '/berth/berth-floor-exec' },
  };
  await writeFile(join(sleeperDir, 'config.json'), specToJson(sleeperSpec as typeof spec));
  const sleeperId = `floor-exec-${process.pid}`;
  const started = await run(crun, ['--root', state, 'run', '--detach', '--bundle', sleeperDir, sleeperId]);
  if (started !== 0) {
    await sys.umount(sleeperRoot).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    throw new Error(`crun run --detach exited ${started}`);
  }
  let n = 0;
  return {
    async cycle() {
      const id = `floor${n++}`;
      const up = join(dir, `up${n}`);
      const work = join(dir, `work${n}`);
      await Promise.all([mkdir(up), mkdir(work)]);
      const t0 = performance.now();
      await sys.mount({
        source: 'overlay',
        fstype: 'overlay',
        target: merged,
        data: `lowerdir=${lower},upperdir=${up},workdir=${work}`,
      });
      const code = await run(crun, ['--root', state, 'run', '--bundle', dir, id]);
      await sys.umount(merged);
      const ms = performance.now() - t0;
      if (code !== 0) throw new Error(`crun run exited ${code}`);
      await Promise.all([rm(up, { recursive: true }), rm(work, { recursive: true })]);
      return ms;
    },
    async exec() {
      const t0 = performance.now();
      const code = await run(crun, ['--root', state, 'exec', sleeperId, 'true']);
      const ms = performance.now() - t0;
      if (code !== 0) throw new Error(`crun exec exited ${code}`);
      return ms;
    },
    async close() {
      await run(crun, ['--root', state, 'delete', '--force', sleeperId]).catch(() => 1);
      await sys.umount(sleeperRoot).catch(() => undefined);
      await sys.umount(merged).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
