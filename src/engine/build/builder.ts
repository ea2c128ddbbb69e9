import { mkdtempSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { HostConfig } from '../../common/docker-types.js';
import { errorMessage, invalidParameter } from '../../common/errors.js';
import type { Filters } from '../../common/filters.js';
import type { Logger } from '../../common/log.js';
import { familiarString, parseNormalizedNamed, tagNameOnly } from '../../common/reference.js';
import type { BuildOptions } from './build.options.js';
import type { BuildContext, ParsedDockerfile } from './build.types.js';
import { BuildCacheStore } from './build-cache.js';
import { BuildOutput, type MessageSink } from './build-output.js';
import { BuildRun, StepError } from './build-run.js';
import type { BuildImagePort, CopySupport, DockerfileSupport } from './builder.ports.js';
import { CacheMounts } from './cache-mounts.js';
import { type CacheItem, cacheItems, type PruneOptions, pruneCache } from './cache-prune.js';
import { LocalSources } from './context/index.js';
import { squashImage } from './squash.js';
import { type BuildContainerPort, StepContainers } from './step-containers.js';

export interface BuilderDeps {
  dataRoot: string;
  images: BuildImagePort;
  containers: BuildContainerPort;
  dockerfile: DockerfileSupport;
  copy: CopySupport;
  /** Receives a build's context (src/engine/build/context/). */
  receiveContext(
    body: Readable,
    opts: {
      workDir: string;
      dockerfile?: string;
      remote?: string;
      signal: AbortSignal;
      onProgress?: (bytes: number, url: string) => void;
      /** Large files' contents held until read (false: written as they arrive). */
      hold?: boolean;
      /** The engine's store of earlier contexts' large files. */
      sources?: LocalSources;
    },
  ): Promise<BuildContext>;
  experimental: boolean;
  log: Logger;
}

/** A build whose context and Dockerfile were accepted: run() streams it, once. */
export interface PreparedBuild {
  run(sink: MessageSink): Promise<void>;
}

/** The host settings of a build's RUN containers, from the build's options. */
function hostConfigOf(o: BuildOptions): HostConfig {
  const h: HostConfig = {};
  if (o.networkMode) h.NetworkMode = o.networkMode;
  if (o.extraHosts.length) h.ExtraHosts = [...o.extraHosts];
  if (o.shmSize) h.ShmSize = o.shmSize;
  if (o.memory) h.Memory = o.memory;
  if (o.memorySwap) h.MemorySwap = o.memorySwap;
  if (o.cpuShares) h.CpuShares = o.cpuShares;
  if (o.cpuSetCpus) h.CpusetCpus = o.cpuSetCpus;
  if (o.cpuSetMems) h.CpusetMems = o.cpuSetMems;
  if (o.cpuPeriod) h.CpuPeriod = o.cpuPeriod;
  if (o.cpuQuota) h.CpuQuota = o.cpuQuota;
  if (o.cgroupParent) h.CgroupParent = o.cgroupParent;
  if (o.ulimits?.length) h.Ulimits = o.ulimits.map((u) => ({ ...u }));
  return h;
}

/**
 * The builder (POST /build): receives the context, parses the Dockerfile (errors before any
 * output), then runs the build with its own work directory under `<data-root>/build/work`, which
 * goes once the answer is given (what is left when the engine stops goes at its next start); a
 * client going away cancels the build: the running step's container is killed, every container
 * the build made removed and the work directory with them, before the build ends.
 */
export class Builder {
  readonly cache: BuildCacheStore;
  readonly cacheMounts: CacheMounts;
  /** Earlier contexts' large files, which equal ones are compared with rather than hashed. */
  readonly sources: LocalSources;
  private readonly workRoot: string;

  constructor(private readonly deps: BuilderDeps) {
    this.cache = new BuildCacheStore(deps.dataRoot);
    this.cacheMounts = new CacheMounts(deps.dataRoot);
    this.sources = new LocalSources(join(deps.dataRoot, 'build', 'sources'));
    this.workRoot = join(deps.dataRoot, 'build', 'work');
  }

  async init(): Promise<void> {
    // what a build left when the engine stopped mid-way
    await rm(this.workRoot, { recursive: true, force: true });
    await mkdir(this.workRoot, { recursive: true, mode: 0o700 });
    await this.cache.init();
    await this.cacheMounts.init();
    await this.sources.init();
  }

  /**
   * `early`: where the messages before the build go (a `remote` download's `Downloading context`
   * progress, as dockerd); the build's own go to run()'s sink.
   */
  async prepare(
    body: Readable,
    opts: BuildOptions,
    signal: AbortSignal,
    early: MessageSink,
  ): Promise<PreparedBuild> {
    if (opts.squash && !this.deps.experimental) {
      throw invalidParameter('squash is only supported with experimental mode');
    }
    const tags = opts.tags.map((t) => {
      const ref = parseNormalizedNamed(t);
      if (ref.digest) throw invalidParameter(`invalid reference format: ${t}`);
      return familiarString(tagNameOnly(ref));
    });
    // synchronous (a few microseconds): under load a call through the thread pool waits its turn
    // while the client's upload stalls on a body nobody reads yet
    const workDir = mkdtempSync(join(this.workRoot, 'build-'));
    let ctx: BuildContext | undefined;
    let parsed: ParsedDockerfile;
    try {
      let downloading = false;
      ctx = await this.deps.receiveContext(body, {
        workDir,
        ...(opts.dockerfile ? { dockerfile: opts.dockerfile } : {}),
        ...(opts.remote ? { remote: opts.remote } : {}),
        signal,
        // a build without the cache reads the files: they are written as they arrive
        hold: !opts.noCache,
        sources: this.sources,
        onProgress: (bytes, url) => {
          downloading = true;
          if (!opts.quiet)
            early({ status: url, progressDetail: { current: bytes }, id: 'Downloading context' });
        },
      });
      if (downloading && !opts.quiet) early({});
      parsed = this.deps.dockerfile.parse(ctx.dockerfile);
      // the target and the stages are checked before anything runs too
      const given = new Map(
        [...opts.buildArgs].flatMap(([k, v]) => (v === null ? [] : [[k, v] as [string, string]])),
      );
      this.deps.dockerfile.stagesFor(parsed, opts.target, this.deps.dockerfile.metaArgEnv(parsed, given));
    } catch (err) {
      await ctx?.cleanup();
      await rm(workDir, { recursive: true, force: true });
      throw err;
    }
    const context = ctx;
    return {
      run: (sink) => this.run(context, parsed, { ...opts, tags }, workDir, sink, signal),
    };
  }

  private async run(
    ctx: BuildContext,
    parsed: ParsedDockerfile,
    opts: BuildOptions,
    workDir: string,
    sink: MessageSink,
    signal: AbortSignal,
  ): Promise<void> {
    const out = new BuildOutput(sink, opts.quiet);
    // a build that ran its course keeps its context's large files in the store
    const removeFiles = async (keep = false) => {
      await ctx.cleanup({ keep }).catch(() => undefined);
      await rm(workDir, { recursive: true, force: true }).catch(() => undefined);
    };
    const containers = new StepContainers(this.deps.containers, hostConfigOf(opts));
    for (const w of parsed.warnings) out.text(`[WARNING]: ${w}\n`);
    let failure: { message: string; code?: number } | undefined;
    let result: { imageId: string; unusedArgs: string[] } | undefined;
    try {
      const run = new BuildRun(
        {
          images: this.deps.images,
          cache: this.cache,
          cacheMounts: this.cacheMounts,
          dockerfile: this.deps.dockerfile,
          copy: this.deps.copy,
          log: this.deps.log,
        },
        opts,
        ctx,
        parsed,
        out,
        containers,
        workDir,
        signal,
      );
      result = await run.run();
      if (opts.squash) {
        result = {
          ...result,
          imageId: await squashImage(this.deps.images, workDir, result.imageId, run.lastBase),
        };
      }
      for (const t of opts.tags) {
        const ref = parseNormalizedNamed(t);
        await this.deps.images.tag(
          result.imageId,
          familiarString({ domain: ref.domain, path: ref.path }),
          ref.tag,
        );
      }
    } catch (err) {
      failure =
        err instanceof StepError ? { message: err.message, code: err.code } : { message: errorMessage(err) };
    } finally {
      // rm/forcerm decided which stay (a cancelled build leaves none), before the last word as dockerd
      // a cancelled build leaves nothing behind when it ends: its files first, then its containers
      // (once they are gone, so is everything else)
      if (signal.aborted) {
        containers.forgetKept();
        await removeFiles();
      }
      await containers.removeAll();
    }
    if (signal.aborted) {
      this.deps.log.info('build cancelled', { reason: failure?.message ?? '' });
    } else if (failure || !result) {
      out.failure(failure?.message ?? 'the build made no image', failure?.code);
    } else {
      out.success(result.imageId, opts.tags, result.unusedArgs);
    }
    // the context and the work directory go once the answer is given
    if (!signal.aborted) void removeFiles(true);
  }

  /** GET /system/df's BuildCache. */
  async items(): Promise<CacheItem[]> {
    return cacheItems(this.cacheDeps());
  }

  /** POST /build/prune. */
  async prune(opts: PruneOptions): Promise<{ CachesDeleted: string[] | null; SpaceReclaimed: number }> {
    return pruneCache(this.cacheDeps(), opts);
  }

  private cacheDeps() {
    return {
      cache: this.cache,
      cacheMounts: this.cacheMounts,
      sources: this.sources,
      images: this.deps.images,
    };
  }
}

export type { Filters };
