import type { Readable } from 'node:stream';
import type { ImageService } from '../images/images.service.js';
import type {
  ContentDigests,
  CopyPlan,
  CopySource,
  CopyTar,
  Instruction,
  ParsedDockerfile,
  Stage,
} from './build.types.js';
import type { RunCommand } from './dockerfile/index.js';

/** What a build asks of the image service. */
export type BuildImagePort = Pick<
  ImageService,
  'commit' | 'get' | 'resolve' | 'pull' | 'tag' | 'createImage' | 'remove' | 'snapshotter' | 'list'
>;

/** The front end's part (src/engine/build/dockerfile/): parsing, expansion, stages, dockerd's texts. */
export interface DockerfileSupport {
  parse(text: string): ParsedDockerfile;
  /** A word with `$VAR`s expanded from `env` (`NAME=value` lines, the first of a name wins). */
  expandWord(word: string, env: string[], escapeToken: string): string;
  /** The words an instruction expands, expanded. */
  expandInstruction(instr: Instruction, env: string[], escapeToken: string): Instruction;
  /** FROM's image and platform expanded with the meta ARGs (a blank base is dockerd's error). */
  expandFrom(stage: Stage, metaEnv: string[], escapeToken: string): { base: string; platform?: string };
  /** The meta ARGs as `NAME=value` lines, with the build args given. */
  metaArgEnv(parsed: ParsedDockerfile, buildArgs: ReadonlyMap<string, string>): string[];
  /** The stage a name or an index names among those before `before`. */
  findStage(parsed: ParsedDockerfile, ref: string, before: number): Stage | undefined;
  /** The stages a target needs, in order (FROM and --from expanded with the meta ARGs). */
  stagesFor(parsed: ParsedDockerfile, target: string | undefined, metaEnv: string[]): Stage[];
  /** The M of `Step N/M`. */
  stepCount(parsed: ParsedDockerfile, stages: Stage[]): number;
  /** A metadata step's history text (`/bin/sh -c #(nop)  ENV A=b`) of the expanded instruction. */
  nopHistory(instr: Instruction, state: { shell: string[]; workingDir: string }): string | undefined;
  /** COPY/ADD's history text. */
  copyHistory(kind: 'copy' | 'add', source: string, dest: string, shell: string[]): string;
  /** RUN's argv with heredocs, and the script file of `RUN <<EOF` with `#!`. */
  runCommand(instr: Extract<Instruction, { kind: 'run' }>, shell: string[]): RunCommand;
  /** RUN's saved command: `|N NAME=value… <cmd>`. */
  runHistoryCmd(cmd: string[], buildArgEnv: string[]): string[];
  /** WORKDIR's path from the current one (dockerd's normalisation). */
  resolveWorkdir(current: string, requested: string): string;
  /** A base image's ONBUILD triggers as instructions. */
  parseOnbuildTriggers(triggers: string[]): Instruction[];
}

/** The context's part (src/engine/build/context/): sources, checksums, the tar of a copy. */
export interface CopySupport {
  /** COPY/ADD sources (wildcards, `--exclude`) resolved in `root`; dockerd's errors. */
  resolveSources(
    root: string,
    patterns: string[],
    opts: { exclude: string[]; instruction: 'COPY' | 'ADD' },
  ): Promise<CopySource[]>;
  /**
   * The sources' checksum as dockerd's history shows it (`file:<sha>`, `dir:<sha>`, `multi:<sha>`);
   * `known`: the context's digests (its files are not read again) when the sources are in it.
   */
  checksum(
    sources: CopySource[],
    inline: CopyPlan['inline'],
    exclude: string[],
    known?: ContentDigests,
  ): Promise<string>;
  /** dockerd's rule: several sources need a destination ending in `/`. */
  checkDestination(instruction: 'COPY' | 'ADD', count: number, dest: string): void;
  /** A path's checksum in `root` (RUN --mount=type=bind's cache key); `known` as for checksum. */
  checksumPath(root: string, path: string, known?: ContentDigests): Promise<string>;
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
