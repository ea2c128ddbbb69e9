import type { ContainerConfig } from '../../common/docker-types.js';
import { DEFAULT_PATH_ENV } from '../images/images.service.js';
import type { BuildOutput } from './build-output.js';

/** Where a stage is: its current image and config (dockerd's dispatchState). */
export interface StageState {
  /** The current image ('' before the first commit of a stage from scratch). */
  imageId: string;
  /** Its top chain ID (null: no layers). */
  chainId: string | null;
  /** The runConfig: the next image's config. */
  config: ContainerConfig;
  /** The ARGs declared in the stage, with their values. */
  args: Map<string, string | undefined>;
  /** MAINTAINER: the author of the stage's images. */
  maintainer?: string;
  /** CMD was given in this stage. */
  cmdSet: boolean;
  escapeToken: string;
  /** Where the stage's steps write (its lane of the build's output). */
  out: BuildOutput;
}

/** A stage's first state from its base image's config (dockerd's beginStage: PATH when none). */
export function beginStage(
  imageId: string,
  chainId: string | null,
  base: ContainerConfig | undefined,
  escapeToken: string,
  out: BuildOutput,
): StageState {
  const config: ContainerConfig = structuredClone(base ?? {});
  const env = config.Env ?? [];
  if (!env.some((e) => e.startsWith('PATH='))) config.Env = [...env, DEFAULT_PATH_ENV];
  return { imageId, chainId, config, args: new Map(), cmdSet: false, escapeToken, out };
}
