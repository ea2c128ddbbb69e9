import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ContainerConfig, HostConfig } from '../../../src/common/docker-types.js';
import { Logger } from '../../../src/common/log.js';
import { buildSpec, type CreateRuntimeOptions, createRuntime } from '../../../src/engine/runtime/index.js';
import type {
  AttachConnection,
  RuntimeDriver,
  StartOptions,
} from '../../../src/engine/runtime/runtime.types.js';

const exec = promisify(execFile);

const applets = [
  'sh',
  'grep',
  'echo',
  'cat',
  'sleep',
  'true',
  'false',
  'stty',
  'ls',
  'id',
  'env',
  'head',
  'yes',
  'dd',
  'unshare',
  'mkdir',
];

/** A busybox rootfs (Debian's busybox-static) in `dir`. */
export async function makeBusyboxRootfs(dir: string): Promise<void> {
  for (const d of ['bin', 'etc', 'proc', 'sys', 'dev', 'tmp', 'root'])
    await mkdir(join(dir, d), { recursive: true });
  await copyFile('/bin/busybox', join(dir, 'bin/busybox'));
  for (const a of applets) await symlink('busybox', join(dir, 'bin', a));
  await writeFile(
    join(dir, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n',
  );
  await writeFile(join(dir, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
}

export interface Harness {
  dir: string;
  rootfs: string;
  execRoot: string;
  dataRoot: string;
  driver: RuntimeDriver;
  /** Ids started here; cleanup deletes them. */
  ids: Set<string>;
  run(
    id: string,
    cmd: string[],
    opts?: Partial<StartOptions> & {
      config?: ContainerConfig;
      hostConfig?: HostConfig;
      driver?: RuntimeDriver;
    },
  ): Promise<{ pid: number; logPath: string }>;
  waitExit(id: string, timeoutMs?: number): Promise<{ exitCode: number; oomKilled: boolean }>;
  newDriver(): Promise<RuntimeDriver>;
  cleanup(): Promise<void>;
}

export async function createHarness(
  name: 'runc' | 'crun' = 'runc',
  options: Pick<CreateRuntimeOptions, 'seccompCompiler' | 'runner'> = {},
): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-rt-'));
  const rootfs = join(dir, 'rootfs');
  await makeBusyboxRootfs(rootfs);
  const execRoot = join(dir, 'exec');
  const dataRoot = join(dir, 'data');
  const log = new Logger('warn');
  const drivers: RuntimeDriver[] = [];
  const newDriver = async () => {
    const d = await createRuntime({ name, execRoot, dataRoot, log, ...options });
    drivers.push(d);
    return d;
  };
  const driver = await newDriver();
  const ids = new Set<string>();
  const exits = new Map<string, { exitCode: number; oomKilled: boolean }>();
  const waiters = new Map<string, (s: { exitCode: number; oomKilled: boolean }) => void>();
  driver.events.on('exit', (id: string, s: { exitCode: number; oomKilled: boolean }) => {
    exits.set(id, s);
    waiters.get(id)?.(s);
  });
  const h: Harness = {
    dir,
    rootfs,
    execRoot,
    dataRoot,
    driver,
    ids,
    newDriver,
    async run(id, cmd, opts = {}) {
      ids.add(id);
      exits.delete(id);
      const logPath = opts.logPath ?? join(dir, `${id}.log`);
      const spec = await buildSpec({
        id,
        rootfs,
        config: { Cmd: cmd, Hostname: id.slice(0, 12), Tty: opts.terminal ?? false, ...opts.config },
        hostConfig: { ...opts.hostConfig },
        hostsPath: '',
        hostnamePath: '',
        resolvConfPath: '',
        cgroupsPath: `/berth-test/${id}`,
        mounts: [],
      });
      const { config: _c, hostConfig: _h, driver: d, ...startOpts } = opts;
      const { pid } = await (d ?? driver).start({
        id,
        bundleDir: join(dir, 'bundles', id),
        spec,
        terminal: false,
        stdin: false,
        stdinOnce: false,
        logPath,
        ...startOpts,
      });
      return { pid, logPath };
    },
    waitExit(id, timeoutMs = 10000) {
      const known = exits.get(id);
      if (known) return Promise.resolve(known);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`container ${id} did not exit in ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.set(id, (s) => {
          clearTimeout(t);
          waiters.delete(id);
          resolve(s);
        });
      });
    },
    async cleanup() {
      for (const id of ids) {
        try {
          await driver.delete(id);
        } catch {
          await exec(name, [`--root=${join(execRoot, name)}`, 'delete', '--force', id]).catch(
            () => undefined,
          );
        }
      }
      for (const d of drivers) await d.close();
      await rm(dir, { recursive: true, force: true });
      // the parent cgroup the runtime made (empty once every container is deleted)
      for (const c of await readdir('/sys/fs/cgroup').catch(() => [] as string[])) {
        await rmdir(join('/sys/fs/cgroup', c, 'berth-test')).catch(() => undefined);
      }
    },
  };
  return h;
}

/** Collect what an attach connection receives until it closes (or `until` matches). */
export function collect(
  conn: AttachConnection,
  until?: (out: string) => boolean,
  timeoutMs = 10000,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const t = setTimeout(
      () =>
        reject(
          new Error(`attach: timed out; stdout=${JSON.stringify(stdout)} stderr=${JSON.stringify(stderr)}`),
        ),
      timeoutMs,
    );
    const done = () => {
      clearTimeout(t);
      resolve({ stdout, stderr });
    };
    conn.on('stdout', (b: Buffer) => {
      stdout += b.toString();
      if (until?.(stdout)) done();
    });
    conn.on('stderr', (b: Buffer) => {
      stderr += b.toString();
    });
    conn.on('close', done);
  });
}
