import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { ContainerConfig, HostConfig, MountSpec } from '../../common/docker-types.js';
import { errorMessage, invalidParameter } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { familiarString, parseNormalizedNamed, tagNameOnly } from '../../common/reference.js';
import { resolveInRoot } from '../runtime/oci/rootfs-path.js';
import type { BuildOptions } from './build.options.js';
import type { BuildContext, Instruction, ParsedDockerfile, RunMount, Stage } from './build.types.js';
import { allowedArgs, BuildArgs, PREDEFINED_ARGS } from './build-args.js';
import { type BuildCacheStore, stepKey } from './build-cache.js';
import { type BuildOutput, OutputLanes } from './build-output.js';
import type { BuildImagePort, CopySupport, DockerfileSupport } from './builder.ports.js';
import type { CacheMounts } from './cache-mounts.js';
import { writeCopyTar } from './copy-layer.js';
import { ImageRoots } from './image-roots.js';
import { beginStage, type StageState } from './stage-state.js';
import type { StepContainers } from './step-containers.js';
import { type CopyWorkspace, copyStep } from './step-copy.js';
import { applyMetadata, isMetadata, nopArgv, shellOf } from './step-metadata.js';
import { checkRunMount, scriptMount } from './step-run.js';

/** A step that failed as dockerd reports it (the message and, for RUN, the exit code). */
export class StepError extends Error {
  constructor(
    message: string,
    readonly code?: number,
  ) {
    super(message);
  }
}

export interface BuildRunDeps {
  images: BuildImagePort;
  cache: BuildCacheStore;
  cacheMounts: CacheMounts;
  dockerfile: DockerfileSupport;
  copy: CopySupport;
  log: Logger;
}

/** What the stages made: by index, and the names they answer to. */
interface StageResult {
  imageId: string;
  chainId: string | null;
}

/**
 * One build, as dockerd's classic builder runs it: the needed stages in order, a step at a time
 * (`Step N/M`), each step's image committed (or found in the cache), the intermediate containers
 * removed as `rm`/`forcerm` say. `run()` answers the last stage's image ID.
 */
export class BuildRun {
  private readonly total: number;
  /** Each needed stage's run, started at once: a stage waits for the ones it names. */
  private readonly running = new Map<number, Promise<StageResult>>();
  /** Stops the other stages when one fails (and follows the build's own signal). */
  private readonly abort = new AbortController();
  private readonly signal: AbortSignal;
  private readonly stages: Stage[];
  private readonly args: BuildArgs;
  private readonly roots: ImageRoots;
  private readonly cacheFrom = new Set<string>();
  /** Every ARG name some stage declared (for RUN's saved command). */
  private readonly declared = new Set<string>();
  private scratchImage?: string;
  /**
   * Work that runs beside the next steps and that the build waits for at its end: COPY
   * workspaces taken down (unmount, snapshot removal).
   */
  private readonly background: Array<Promise<void>> = [];
  /** The last stage's base image (what `squash` squashes onto). */
  lastBase: { imageId: string; chainId: string | null } = { imageId: '', chainId: null };

  constructor(
    private readonly deps: BuildRunDeps,
    private readonly opts: BuildOptions,
    private readonly ctx: BuildContext,
    private readonly parsed: ParsedDockerfile,
    private readonly out: BuildOutput,
    private readonly containers: StepContainers,
    private readonly workDir: string,
    signal: AbortSignal,
  ) {
    this.signal = AbortSignal.any([signal, this.abort.signal]);
    this.args = new BuildArgs(opts.buildArgs);
    // the ARGs before FROM, in force for every FROM (and for the stages a target needs)
    for (const a of parsed.metaArgs) {
      this.declared.add(a.name);
      const value =
        a.value === undefined
          ? undefined
          : deps.dockerfile.expandWord(a.value, this.args.metaEnv(), parsed.escapeToken);
      this.args.declareMeta(a.name, value);
    }
    this.stages = withLabels(
      deps.dockerfile.stagesFor(parsed, opts.target, this.args.metaEnv()),
      opts.labels,
    );
    this.total = deps.dockerfile.stepCount(parsed, this.stages);
    this.roots = new ImageRoots(deps.images.snapshotter, workDir);
  }

  async run(): Promise<{ imageId: string; unusedArgs: string[] }> {
    try {
      // the ARGs before FROM: a step each, nothing else printed
      let step = 0;
      for (const i of this.parsed.metaArgInstructions ?? []) this.out.step(++step, this.total, i.original);
      await this.collectCacheFrom();
      // independent stages run at once, each writing to its lane; the lanes reach the client in
      // stage order (a stage's output is held until the stages before it are done)
      const lanes = new OutputLanes(this.out, this.stages.length);
      let firstError: unknown;
      const runs = this.stages.map((stage, n) => {
        const first = step + 1;
        step += 1 + stage.instructions.length;
        const p = this.runStage(stage, lanes.lane(n), first).then(
          (r) => {
            lanes.done(n, r.imageId);
            return r;
          },
          (err: unknown) => {
            lanes.failed(n);
            if (firstError === undefined) {
              firstError = err;
              this.abort.abort(err);
            }
            throw err;
          },
        );
        this.running.set(stage.index, p);
        return p;
      });
      const settled = await Promise.allSettled(runs);
      if (firstError !== undefined) throw firstError;
      const last = (settled[settled.length - 1] as PromiseFulfilledResult<StageResult> | undefined)?.value;
      if (!last) throw invalidParameter('the Dockerfile has no stage to build');
      return { imageId: last.imageId, unusedArgs: this.args.unused() };
    } finally {
      await Promise.all(this.background);
      await this.roots.release();
      if (this.scratchImage) {
        await this.deps.images
          .remove(this.scratchImage, { force: false, prune: false })
          .catch(() => undefined);
      }
    }
  }

  // ------------------------------------------------------------------ expansion

  /** The env a stage expands words with: its config's Env, then the ARGs in scope. */
  private scope(s: StageState): string[] {
    const env = s.config.Env ?? [];
    const args = allowedArgs(s.args, this.args.predefined(), env);
    return [...env, ...args.map(([k, v]) => `${k}=${v}`)];
  }

  private expand(s: StageState, i: Instruction): Instruction {
    return this.deps.dockerfile.expandInstruction(i, this.scope(s), s.escapeToken);
  }

  // ------------------------------------------------------------------ stages

  /** A stage by name or index (COPY --from, RUN --mount from=, FROM <stage>) among those built. */
  private async stageRef(name: string, before: number): Promise<StageResult | undefined> {
    const s = this.deps.dockerfile.findStage(this.parsed, name, before);
    if (!s) return undefined;
    const run = this.running.get(s.index);
    if (!run) throw invalidParameter(`stage ${name} is not built before it is used`);
    return run;
  }

  private async runStage(stage: Stage, out: BuildOutput, first: number): Promise<StageResult> {
    let step = first;
    out.step(step, this.total, stage.original);
    const from = this.deps.dockerfile.expandFrom(stage, this.args.metaEnv(), this.parsed.escapeToken);
    const base = await this.baseImage(from.base, from.platform, out, stage.index);
    const state = beginStage(base.imageId, base.chainId, base.config, this.parsed.escapeToken, out);
    if (stage === this.stages[this.stages.length - 1])
      this.lastBase = { imageId: base.imageId, chainId: base.chainId };
    state.config.Image = base.imageId;
    const triggers = state.config.OnBuild ?? [];
    state.config.OnBuild = null;
    if (triggers.length) await this.runTriggers(state, triggers, stage.index);
    out.image(state.imageId || base.imageId);
    for (const i of stage.instructions) {
      this.signal.throwIfAborted();
      out.step(++step, this.total, i.original);
      await this.dispatch(state, i, stage.index);
      out.image(state.imageId);
    }
    if (!state.imageId && stage === this.stages[this.stages.length - 1]) {
      throw invalidParameter('No image was generated. Is your Dockerfile empty?');
    }
    return { imageId: state.imageId, chainId: state.chainId };
  }

  /** `# Executing N build trigger(s)`, then each trigger as a step without its own Step line. */
  private async runTriggers(state: StageState, triggers: string[], stageIndex: number): Promise<void> {
    state.out.text(`# Executing ${triggers.length} build trigger`);
    if (triggers.length > 1) state.out.text('s');
    state.out.text('\n');
    for (const i of this.deps.dockerfile.parseOnbuildTriggers(triggers))
      await this.dispatch(state, i, stageIndex);
  }

  /** FROM's image: a stage before, scratch, a local image, or one pulled (always with `pull`). */
  private async baseImage(
    name: string,
    platform: string | undefined,
    out: BuildOutput,
    before: number,
  ): Promise<{ imageId: string; chainId: string | null; config?: ContainerConfig }> {
    const stage = await this.stageRef(name, before);
    if (stage) {
      const img = await this.deps.images.get(stage.imageId);
      return {
        imageId: stage.imageId,
        chainId: stage.chainId,
        ...(img ? { config: img.config.config } : {}),
      };
    }
    if (name.toLowerCase() === 'scratch') return { imageId: '', chainId: null };
    const plat = platform ?? this.opts.platform;
    let img = this.opts.pull ? undefined : await this.deps.images.resolve(name).catch(() => undefined);
    if (!img) {
      await this.pull(name, plat, out);
      img = await this.deps.images.resolve(name);
    }
    return { imageId: img.id, chainId: img.chainId, config: img.config.config };
  }

  private async pull(name: string, platform: string | undefined, out: BuildOutput): Promise<void> {
    const ref = tagNameOnly(parseNormalizedNamed(name));
    const registryAuth = this.authFor(ref.domain);
    await this.deps.images.pull({
      image: familiarString({ domain: ref.domain, path: ref.path }),
      ...(ref.digest ? { tag: ref.digest } : { tag: ref.tag ?? 'latest' }),
      ...(platform ? { platform } : {}),
      ...(registryAuth ? { registryAuth } : {}),
      signal: this.signal,
      onMessage: (m) => out.progress(m.status, m.id, m.detail),
    });
  }

  /** The X-Registry-Config entry for a registry (Docker Hub's under its index address). */
  private authFor(domain: string): string | undefined {
    const auths = this.opts.registryAuth;
    const hub = domain === 'docker.io' ? ['https://index.docker.io/v1/', 'index.docker.io', 'docker.io'] : [];
    for (const k of [domain, `https://${domain}`, `http://${domain}`, ...hub]) {
      const v = auths.get(k);
      if (v) return v;
    }
    return undefined;
  }

  // ------------------------------------------------------------------ steps

  private async dispatch(state: StageState, raw: Instruction, stageIndex: number): Promise<void> {
    state.config.Image = state.imageId;
    const i = this.expand(state, raw);
    const shell = shellOf(state.config);
    const nop = (oneArg: boolean, workingDir = state.config.WorkingDir ?? '') => {
      const text = this.deps.dockerfile.nopHistory(i, { shell, workingDir });
      if (text === undefined) throw new Error(`no history text for ${i.kind}`);
      return nopArgv(text, shell, oneArg);
    };
    if (i.kind === 'workdir') {
      const wd = this.deps.dockerfile.resolveWorkdir(state.config.WorkingDir || '/', i.value);
      state.config.WorkingDir = wd;
      await this.commitMeta(state, nop(true, wd), wd);
      return;
    }
    if (isMetadata(i)) {
      const change = applyMetadata(i, state.config, state.cmdSet);
      state.config = change.config;
      if (change.maintainer !== undefined) state.maintainer = change.maintainer;
      if (change.cmdSet) state.cmdSet = true;
      await this.commitMeta(state, nop(false));
      return;
    }
    switch (i.kind) {
      case 'arg': {
        for (const a of i.args) {
          this.declared.add(a.name);
          state.args.set(a.name, this.args.declare(a.name, a.value));
        }
        await this.commitMeta(state, nop(false));
        return;
      }
      case 'run':
        await this.runStep(state, i, stageIndex);
        return;
      case 'copy':
      case 'add':
        await copyStep(
          {
            state,
            instruction: i,
            ctx: this.ctx,
            dockerfile: this.deps.dockerfile,
            copy: this.deps.copy,
            roots: this.roots,
            signal: this.signal,
            stageRoot: async (name) => {
              const img = await this.baseImage(name, undefined, state.out, stageIndex);
              return this.roots.root(img.chainId);
            },
          },
          {
            cached: (cmd, sum) => this.probeCache(state, cmd, sum),
            workspace: () => this.copyWorkspace(state),
          },
        );
        return;
    }
  }

  /** The image ID the cache has for this step (Using cache shown), or undefined. */
  private async probeCache(state: StageState, cmd: string[], sources?: string): Promise<boolean> {
    if (this.opts.noCache) return false;
    const key = stepKey({ parent: state.imageId, cmd, config: JSON.stringify(state.config), sources });
    // with `cachefrom`, only those images' chains are the cache (dockerd's classic prober)
    const record = this.opts.cacheFrom.length ? undefined : this.deps.cache.get(key);
    let hit: string | undefined;
    if (record && (await this.deps.images.get(record.imageId))) {
      hit = record.imageId;
      // the use is counted at once and written while the build goes on (the answer does not wait
      // for it); a failed write costs the record its latest use on disk only
      this.deps.cache
        .touch(record)
        .catch((err: unknown) =>
          this.deps.log.warn('build cache: a use not recorded', { key, error: errorMessage(err) }),
        );
    } else {
      hit = await this.fromCacheImages(state, cmd);
      if (hit) await this.deps.cache.put(key, hit, state.imageId, cmd.join(' '));
    }
    if (!hit) return false;
    const img = await this.deps.images.get(hit);
    state.out.usingCache();
    state.imageId = hit;
    state.chainId = img?.chainId ?? state.chainId;
    return true;
  }

  /** `cachefrom`: an image of those chains made from this parent with this command and config. */
  private async fromCacheImages(state: StageState, cmd: string[]): Promise<string | undefined> {
    if (this.cacheFrom.size === 0) return undefined;
    const want = JSON.stringify(cmd);
    for (const id of this.cacheFrom) {
      const img = await this.deps.images.get(id);
      if (!img || img.parent !== state.imageId) continue;
      if (JSON.stringify(img.config.container_config?.Cmd ?? []) !== want) continue;
      return id;
    }
    return undefined;
  }

  private async collectCacheFrom(): Promise<void> {
    for (const name of this.opts.cacheFrom) {
      let img = await this.deps.images.resolve(name).catch(() => undefined);
      while (img) {
        this.cacheFrom.add(img.id);
        img = img.parent ? await this.deps.images.get(img.parent) : undefined;
      }
    }
  }

  /** A container for a step from the stage's current image (a placeholder image for scratch). */
  private async stepContainer(
    state: StageState,
    config: ContainerConfig,
    host: Partial<HostConfig> = {},
  ): Promise<string> {
    const image = state.imageId || (await this.scratch());
    const { id, warnings } = await this.containers.create({ ...config, Image: image }, host);
    for (const w of warnings) state.out.warning(w);
    return id;
  }

  /** An image with no layers to create containers of a stage from scratch (removed at the end). */
  private async scratch(): Promise<string> {
    this.scratchImage ??= await this.deps.images.createImage({
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      os: 'linux',
      config: {},
      rootfs: { type: 'layers', diff_ids: [] },
    });
    return this.scratchImage;
  }

  /**
   * A metadata step (moby's commit): from the cache, or a container with the `#(nop)` command,
   * committed and removed. WORKDIR makes its directory in the container first.
   */
  private async commitMeta(state: StageState, cmd: string[], workdir?: string): Promise<void> {
    if (await this.probeCache(state, cmd)) return;
    const cid = await this.stepContainer(state, { ...state.config, Cmd: cmd });
    state.out.runningIn(cid);
    if (workdir && !(await this.containers.kindOf(cid, workdir))) {
      await this.containers.extract(cid, this.deps.copy.directoryTar(workdir, state.config.User));
    }
    await this.commitContainer(state, cid, cmd);
  }

  /** Commit a step's container as the stage's next image; remove it (`rm`) and record the cache. */
  private async commitContainer(
    state: StageState,
    cid: string,
    cmd: string[],
    sources?: string,
  ): Promise<void> {
    const key = stepKey({ parent: state.imageId, cmd, config: JSON.stringify(state.config), sources });
    const containerConfig: ContainerConfig = { ...state.config, Cmd: cmd };
    const id = await this.deps.images.commit({
      key: cid,
      ...(state.imageId ? { parentImageId: state.imageId } : {}),
      containerId: cid,
      containerConfig,
      config: { ...state.config },
      ...(state.maintainer ? { author: state.maintainer } : {}),
    });
    if (this.opts.rm || this.opts.forceRm) {
      await this.containers.remove(cid);
      state.out.removing(cid);
    } else {
      this.containers.keep(cid);
    }
    await this.deps.cache.put(key, id, state.imageId, cmd.join(' '));
    const img = await this.deps.images.get(id);
    state.imageId = id;
    state.chainId = img?.chainId ?? null;
  }

  /**
   * Where a COPY/ADD goes: a writable snapshot of the stage's image mounted in the build's work
   * directory (no container, as dockerd's classic builder copies into a layer), committed as the
   * stage's next image. The commit reads the snapshot's upper directory while it is still mounted
   * (what was written through the mount is in it); the unmount and the snapshot's removal run
   * while the next steps do, and the build waits for them before it ends.
   */
  private async copyWorkspace(state: StageState): Promise<CopyWorkspace> {
    const snapshots = this.deps.images.snapshotter;
    const key = `build-copy-${randomBytes(16).toString('hex')}`;
    const dir = join(this.workDir, key);
    let mounted = false;
    let prepared = false;
    const release = async () => {
      if (mounted) await snapshots.unmount(dir).catch(() => undefined);
      mounted = false;
      if (prepared) await snapshots.remove(key).catch(() => undefined);
      prepared = false;
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    };
    try {
      await snapshots.prepare(key, state.chainId);
      prepared = true;
      await mkdir(dir, { recursive: true });
      await snapshots.mount(key, dir);
      mounted = true;
    } catch (err) {
      await release();
      throw err;
    }
    return {
      kindOf: async (path) => {
        const st = await stat(await resolveInRoot(dir, path)).catch(() => undefined);
        return st ? (st.isDirectory() ? 'dir' : 'other') : undefined;
      },
      write: (tar) => writeCopyTar(dir, tar),
      commit: (cmd, sources) => this.commitSnapshot(state, key, cmd, sources),
      release: async () => {
        this.background.push(release());
      },
    };
  }

  /** The stage's next image from a writable snapshot (COPY/ADD), cached under the step's key. */
  private async commitSnapshot(
    state: StageState,
    snapshot: string,
    cmd: string[],
    sources: string,
  ): Promise<void> {
    const key = stepKey({ parent: state.imageId, cmd, config: JSON.stringify(state.config), sources });
    const id = await this.deps.images.commit({
      key: snapshot,
      ...(state.imageId ? { parentImageId: state.imageId } : {}),
      containerId: '',
      containerConfig: { ...state.config, Cmd: cmd },
      config: { ...state.config },
      ...(state.maintainer ? { author: state.maintainer } : {}),
    });
    await this.deps.cache.put(key, id, state.imageId, cmd.join(' '));
    const img = await this.deps.images.get(id);
    state.imageId = id;
    state.chainId = img?.chainId ?? null;
  }

  /** RUN: a container with the command, its output streamed, committed when it exits 0. */
  private async runStep(
    state: StageState,
    i: Extract<Instruction, { kind: 'run' }>,
    stageIndex: number,
  ): Promise<void> {
    const env = state.config.Env ?? [];
    const args = allowedArgs(state.args, this.args.predefined(), env);
    const { argv: cmd, script } = this.deps.dockerfile.runCommand(i, shellOf(state.config));
    const saved = args
      .filter(([k]) => !PREDEFINED_ARGS.has(k) || this.declared.has(k))
      .map(([k, v]) => `${k}=${v}`);
    const saveCmd = this.deps.dockerfile.runHistoryCmd(cmd, saved);
    const mounts: MountSpec[] = [];
    if (script) mounts.push(await scriptMount(this.workDir, script));
    const releases: Array<() => Promise<void>> = [];
    const keyParts: string[] = [];
    try {
      for (const m of i.mounts) {
        const r = await this.runMount(state, m, stageIndex);
        mounts.push(r.spec);
        if (r.keyPart) keyParts.push(r.keyPart);
        if (r.release) releases.push(r.release);
      }
      const sources = keyParts.length ? keyParts.join(',') : undefined;
      if (await this.probeCache(state, saveCmd, sources)) return;
      // a bind mount of the context shows its files: their held contents are written out first
      if (i.mounts.some((m) => m.type === 'bind' && !m.from)) await this.ctx.contents();
      const host: Partial<HostConfig> = {};
      if (mounts.length) host.Mounts = mounts;
      if (i.network === 'none') host.NetworkMode = 'none';
      else if (i.network === 'host') host.NetworkMode = 'host';
      const runConfig: ContainerConfig = {
        ...state.config,
        Cmd: cmd,
        Entrypoint: [''],
        Env: [...env, ...args.map(([k, v]) => `${k}=${v}`)],
        Healthcheck: null,
        AttachStdout: true,
        AttachStderr: true,
      };
      const cid = await this.stepContainer(state, runConfig, host);
      state.out.runningIn(cid);
      const code = await this.containers.run(cid, (s, d) => state.out.output(s, d), this.signal);
      if (code !== 0) {
        if (!this.opts.forceRm) this.containers.keep(cid);
        const text = `The command '${cmd.join(' ')}' returned a non-zero code: ${code}`;
        throw new StepError(text, code);
      }
      await this.commitContainer(state, cid, saveCmd, sources);
    } finally {
      for (const r of releases) await r().catch(() => undefined);
    }
  }

  /** A RUN --mount as the container's mount. */
  private async runMount(
    state: StageState,
    m: RunMount,
    stageIndex: number,
  ): Promise<{ spec: MountSpec; keyPart?: string; release?: () => Promise<void> }> {
    const target = posix.resolve(state.config.WorkingDir || '/', m.target);
    checkRunMount({ ...m, target });
    if (m.type === 'tmpfs') {
      return {
        spec: { Type: 'tmpfs', Target: target, ...(m.size ? { TmpfsOptions: { SizeBytes: m.size } } : {}) },
      };
    }
    if (m.type === 'cache') {
      const held = await this.deps.cacheMounts.acquire(m.id || target, m.sharing ?? 'shared', {
        ...(m.mode !== undefined ? { mode: m.mode } : {}),
        ...(m.uid !== undefined ? { uid: m.uid } : {}),
        ...(m.gid !== undefined ? { gid: m.gid } : {}),
      });
      return {
        spec: { Type: 'bind', Source: held.path, Target: target, ReadOnly: m.readonly },
        release: held.release,
      };
    }
    // bind: from the context (read-only unless rw, then a copy), or from a stage's or image's files
    const source = m.source || '/';
    let root: string;
    let keyPart: string;
    if (m.from) {
      const s = await this.baseImage(m.from, undefined, state.out, stageIndex);
      root = await this.roots.root(s.chainId);
      keyPart = `${s.imageId}:${source}`;
    } else {
      root = this.ctx.root;
      keyPart = await this.deps.copy.checksumPath(root, source, this.ctx.digests);
    }
    const hostPath = await this.deps.copy.scopedPath(root, source);
    if (!m.readonly && !m.from) {
      await this.ctx.contents();
      const copy = await mkdtemp(join(this.workDir, 'bind-'));
      await this.deps.copy.copyTree(hostPath, join(copy, 'src'));
      return {
        spec: { Type: 'bind', Source: join(copy, 'src'), Target: target, ReadOnly: false },
        keyPart,
        release: () => rm(copy, { recursive: true, force: true }),
      };
    }
    return { spec: { Type: 'bind', Source: hostPath, Target: target, ReadOnly: true }, keyPart };
  }
}

/**
 * The build's `labels` as dockerd's classic builder adds them: a `LABEL k=v` step each (sorted by
 * name) at the end of the last stage, counted in the steps.
 */
function withLabels(stages: Stage[], labels: Record<string, string>): Stage[] {
  const names = Object.keys(labels).sort();
  const last = stages[stages.length - 1];
  if (!last || names.length === 0) return stages;
  const line = last.instructions[last.instructions.length - 1]?.endLine ?? last.line;
  const added: Instruction[] = names.map((k) => ({
    kind: 'label',
    pairs: [[k, labels[k] as string]],
    line,
    endLine: line,
    original: `LABEL ${k}=${labels[k]}`,
  }));
  return [...stages.slice(0, -1), { ...last, instructions: [...last.instructions, ...added] }];
}
