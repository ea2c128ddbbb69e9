import type { ContainerConfig } from '../../../common/docker-types.js';
import { conflict } from '../../../common/errors.js';
import { familiarString, parseNormalizedNamed, withTag } from '../../../common/reference.js';
import { applyChanges } from '../../images/changes.js';
import type { CommitOptions } from '../../images/images.types.js';
import type { Container } from './container.js';
import type { ContainerEvents } from './events.js';

/** The image half of docker commit (ImageService.commit): a layer and an image, tagged when asked. */
export interface ImageCommitter {
  commit(opts: CommitOptions): Promise<string>;
}

/** POST /commit's options, as the route reads them. */
export interface CommitRequest {
  repo?: string;
  tag?: string;
  author?: string;
  comment?: string;
  /** Pause a running container while its layer is read (API default true). */
  pause: boolean;
  /** The request body's Config; absent: the container's own. */
  config?: ContainerConfig;
  /** Dockerfile instructions (`changes`), applied over the config. */
  changes: string[];
}

export interface CommitDeps {
  images: ImageCommitter;
  events: ContainerEvents;
  pause(c: Container): Promise<void>;
  unpause(c: Container): Promise<void>;
}

/**
 * docker commit's container half, as dockerd 20.10's CreateImageFromContainer: refuse a dead
 * container or one being removed; pause a running one (unpaused after, whatever happens; neither
 * step's failure is the commit's); the config is the body's or the container's, the changes
 * applied over it, then merged with the container's config; the image half makes the layer and
 * image (and tags it: `tag`); then the container's `commit` event. Returns the image ID.
 */
export async function commitContainer(deps: CommitDeps, c: Container, req: CommitRequest): Promise<string> {
  if (c.state.Dead) throw conflict(`You cannot commit container ${c.id} which is Dead`);
  if (c.removing) throw conflict(`You cannot commit container ${c.id} which is being removed`);
  let paused = false;
  if (req.pause && c.state.Running && !c.state.Paused && !c.state.Restarting) {
    paused = await deps.pause(c).then(
      () => true,
      () => false,
    );
  }
  try {
    const containerConfig = { ...c.record.Config };
    // as dockerd's container config (and inspect) has them: no empty Volumes, Labels always a map
    if (containerConfig.Volumes && Object.keys(containerConfig.Volumes).length === 0) {
      containerConfig.Volumes = null;
    }
    containerConfig.Labels ??= {};
    const config = applyChanges(req.config ?? containerConfig, req.changes);
    mergeCommitConfig(config, containerConfig);
    const id = await deps.images.commit({
      key: c.id,
      parentImageId: c.record.Image || undefined,
      containerId: c.id,
      containerConfig,
      config,
      ...(req.author ? { author: req.author } : {}),
      ...(req.comment ? { comment: req.comment } : {}),
      // a tag without a repository is ignored, as dockerd (20.10 and later) does
      ...(req.repo ? { repo: req.repo, ...(req.tag ? { tag: req.tag } : {}) } : {}),
    });
    deps.events.emit(c, 'commit', {
      comment: req.comment ?? '',
      imageID: id,
      imageRef: req.repo ? imageRef(req.repo, req.tag) : '',
    });
    return id;
  } finally {
    if (paused) await deps.unpause(c).catch(() => undefined);
  }
}

/** What TagImage answers: the familiar form of `repo` with `tag` (if any) in place of its own. */
function imageRef(repo: string, tag: string | undefined): string {
  const ref = parseNormalizedNamed(repo);
  return familiarString(tag ? withTag(ref, tag) : ref);
}

/**
 * moby's merge (daemon/commit.go): fill in what the new config (`user`, changed in place) leaves
 * unset from the container's config (`base`).
 */
export function mergeCommitConfig(user: ContainerConfig, base: ContainerConfig): void {
  if (!user.User) user.User = base.User ?? '';
  if (!user.ExposedPorts || Object.keys(user.ExposedPorts).length === 0) {
    user.ExposedPorts = base.ExposedPorts ?? null;
  } else if (base.ExposedPorts) {
    const ports = { ...user.ExposedPorts };
    for (const p of Object.keys(base.ExposedPorts)) if (!Object.hasOwn(ports, p)) ports[p] = {};
    user.ExposedPorts = ports;
  }
  if (!user.Env?.length) user.Env = base.Env ?? null;
  else {
    const env = [...user.Env];
    const keys = new Set(env.map((e) => e.split('=')[0]));
    for (const e of base.Env ?? []) if (!keys.has(e.split('=')[0])) env.push(e);
    user.Env = env;
  }
  const labels = { ...(user.Labels ?? {}) };
  for (const [k, v] of Object.entries(base.Labels ?? {})) if (!Object.hasOwn(labels, k)) labels[k] = v;
  user.Labels = labels;
  if (!user.Entrypoint?.length) {
    if (!user.Cmd?.length) {
      user.Cmd = base.Cmd ?? null;
      if (base.ArgsEscaped) user.ArgsEscaped = true;
      else delete user.ArgsEscaped;
    }
    if (user.Entrypoint === null || user.Entrypoint === undefined) user.Entrypoint = base.Entrypoint ?? null;
  }
  if (base.Healthcheck) {
    if (!user.Healthcheck) user.Healthcheck = base.Healthcheck;
    else {
      const h = { ...user.Healthcheck };
      const b = base.Healthcheck;
      if (!h.Test?.length && b.Test) h.Test = b.Test;
      if (!h.Interval && b.Interval) h.Interval = b.Interval;
      if (!h.Timeout && b.Timeout) h.Timeout = b.Timeout;
      if (!h.StartPeriod && b.StartPeriod) h.StartPeriod = b.StartPeriod;
      if (!h.Retries && b.Retries) h.Retries = b.Retries;
      user.Healthcheck = h;
    }
  }
  if (!user.WorkingDir) user.WorkingDir = base.WorkingDir ?? '';
  if (!user.Volumes || Object.keys(user.Volumes).length === 0) user.Volumes = base.Volumes ?? null;
  else user.Volumes = { ...user.Volumes, ...(base.Volumes ?? {}) };
  if (!user.StopSignal && base.StopSignal) user.StopSignal = base.StopSignal;
}
