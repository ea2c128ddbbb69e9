import type { Readable } from 'node:stream';
import type { ContainerConfig, HostConfig } from '../../common/docker-types.js';
import type { CreateOptions } from '../containers/core/create.js';
import type { ContainerService } from '../containers/service.types.js';

/** What a build asks of the containers service. */
export type BuildContainerPort = Pick<
  ContainerService,
  'create' | 'start' | 'attach' | 'wait' | 'remove' | 'extractTo' | 'statPath' | 'kill'
>;

/** The create choices of a build's containers (the current API's: what dockerd's builder uses). */
const CREATE_OPTIONS: CreateOptions = {
  defaultIpcMode: 'private',
  kernelMemory: false,
  readOnlyNonRecursive: false,
  defaultNetworkIsBridge: false,
};

/**
 * The containers of one build's steps (dockerd's containerManager): created from the step's
 * image with the build's host settings, run with their output streamed, removed when the step is
 * done (`rm`) or at the end whatever happened (`forcerm`, a cancelled build). Every container it
 * made and has not removed is in `left`.
 */
export class StepContainers {
  private readonly mine = new Set<string>();
  private readonly kept = new Set<string>();

  constructor(
    private readonly containers: BuildContainerPort,
    private readonly hostConfig: HostConfig,
  ) {}

  async create(
    config: ContainerConfig,
    host: Partial<HostConfig> = {},
  ): Promise<{ id: string; warnings: string[] }> {
    const hostConfig: HostConfig = { ...this.hostConfig, ...host };
    const r = await this.containers.create({
      config,
      hostConfig,
      networkingConfig: {},
      options: CREATE_OPTIONS,
    });
    this.mine.add(r.Id);
    return { id: r.Id, warnings: r.Warnings ?? [] };
  }

  /**
   * Start the container with its output going to `output` as it comes; resolves to its exit code.
   * A cancelled build kills it (and the promise rejects with the signal's reason).
   */
  async run(
    id: string,
    output: (stream: 'stdout' | 'stderr', data: Buffer) => void,
    signal: AbortSignal,
  ): Promise<number> {
    signal.throwIfAborted();
    const attach = await this.containers.attach(id, {
      stdin: false,
      stdout: true,
      stderr: true,
      stream: true,
      logs: false,
    });
    const session = await attach.begin({ output, end: () => undefined });
    const waiting = await this.containers.wait(id, 'next-exit');
    const onAbort = () => void this.containers.kill(id, 'SIGKILL').catch(() => undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await this.containers.start(id);
      const result = await waiting();
      await session.done;
      signal.throwIfAborted();
      return result.StatusCode;
    } finally {
      signal.removeEventListener('abort', onAbort);
      session.close();
    }
  }

  /** Extract a tar into the container's filesystem at `/` (COPY, ADD, WORKDIR), owners as in the tar. */
  async extract(id: string, tar: Readable): Promise<void> {
    await this.containers.extractTo(id, '/', tar, { noOverwriteDirNonDir: false, copyUIDGID: false });
  }

  /** What a path is in the container's filesystem (symlinks followed), or undefined. */
  async kindOf(id: string, path: string): Promise<'dir' | 'other' | undefined> {
    try {
      const st = await this.containers.statPath(id, path);
      // Go's os.ModeDir
      return (st.mode & 0x80000000) !== 0 ? 'dir' : 'other';
    } catch {
      return undefined;
    }
  }

  async remove(id: string): Promise<void> {
    await this.containers.remove(id, { force: true, volumes: true });
    this.mine.delete(id);
  }

  /** The containers made and not removed yet. */
  get left(): string[] {
    return [...this.mine];
  }

  /** Keep a container after the build (`rm=false`, or a failed step without forcerm). */
  keep(id: string): void {
    this.mine.delete(id);
    this.kept.add(id);
  }

  /** A cancelled build keeps none: the kept ones go with the rest at removeAll(). */
  forgetKept(): void {
    for (const id of this.kept) this.mine.add(id);
    this.kept.clear();
  }

  async removeAll(): Promise<void> {
    for (const id of this.left) await this.remove(id).catch(() => this.mine.delete(id));
  }
}
