import type { Readable } from 'node:stream';
import type { ImageService } from '../images/images.service.js';
import type { CopyPlan, CopySource, CopyTar, ParsedDockerfile, Stage } from './build.types.js';

/** What a build asks of the image service. */
export type BuildImagePort = Pick<
  ImageService,
  'commit' | 'get' | 'resolve' | 'pull' | 'tag' | 'createImage' | 'remove' | 'snapshotter' | 'list'
>;

/** The front end's part (src/engine/build/dockerfile/). */
export interface DockerfileSupport {
  parse(text: string): ParsedDockerfile;
  /** A word with `$VAR`s expanded from `env` (`NAME=value` lines, the first of a name wins). */
  expandWord(word: string, env: string[], escapeToken: string): string;
  expandWords(word: string, env: string[], escapeToken: string): string[];
  /** The stages a target needs, in order. */
  stagesFor(parsed: ParsedDockerfile, target?: string): Stage[];
  /** The M of `Step N/M`. */
  stepCount(parsed: ParsedDockerfile, stages: Stage[]): number;
}

/** The context's part (src/engine/build/context/): sources, checksums, the tar of a copy. */
export interface CopySupport {
  /** COPY/ADD sources (wildcards, `--exclude`) resolved in `root`; dockerd's errors. */
  resolveSources(
    root: string,
    patterns: string[],
    opts: { exclude: string[]; instruction: 'COPY' | 'ADD' },
  ): Promise<CopySource[]>;
  /** The sources' checksum as dockerd's history shows it (`file:<sha>`, `dir:<sha>`, `multi:<sha>`). */
  checksum(sources: CopySource[], inline: CopyPlan['inline'], exclude: string[]): Promise<string>;
  /** dockerd's rule: several sources need a destination ending in `/`. */
  checkDestination(instruction: 'COPY' | 'ADD', count: number, dest: string): void;
  /** A path's checksum in `root` (RUN --mount=type=bind's cache key). */
  checksumPath(root: string, path: string): Promise<string>;
  /** A path inside `root` on the host, never outside it (symlinks resolved in the root). */
  scopedPath(root: string, path: string): Promise<string>;
  makeCopyTar(plan: CopyPlan): CopyTar;
  /** `--chown` from the /etc/passwd and /etc/group of an image's mounted filesystem. */
  resolveChown(spec: string, rootfs: string): Promise<{ uid: number; gid: number }>;
  /** ADD of an http(s) URL: the file's name (the URL's last element, or dest's), content and mtime. */
  fetchAddUrl(
    url: string,
    signal: AbortSignal,
    checksum: string | undefined,
    dest: string,
  ): Promise<{ name: string; content: Buffer; mtime?: Date }>;
  /** A tar of one directory (WORKDIR), owned by the stage's user as dockerd makes it. */
  directoryTar(path: string, user?: string): Readable;
  /** A copy of a file tree (a read-write RUN bind of the context). */
  copyTree(from: string, to: string): Promise<void>;
}
