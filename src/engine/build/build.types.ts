import type { Readable } from 'node:stream';
import type { HealthConfig } from '../../common/docker-types.js';

/**
 * The builder's parts and the contracts between them:
 * - dockerfile/ (the front end): Dockerfile text → stages of typed instructions, raw (unexpanded)
 *   words, each with its line; variable expansion; nothing runs.
 * - context/: the client's context (a tar in any compression, a plain Dockerfile, a `remote` URL)
 *   received defensively into a directory, `.dockerignore` applied; COPY/ADD sources resolved,
 *   checksummed for the cache and packed as a tar to extract into a container.
 * - the executor (builder.ts and its steps): stages run as dockerd's classic builder does
 *   (a container per step, committed), with the cache, output and events.
 */

// ---------------------------------------------------------------- the front end

/** A here-document (`<<EOF`, `<<-EOF`, `<<"EOF"`) attached to RUN, COPY or ADD. */
export interface Heredoc {
  /** The word after `<<` (without quotes or `-`). */
  name: string;
  /** The body, lines joined with "\n" (with a final "\n"); leading tabs stripped for `<<-`. */
  content: string;
  /** False when the word was quoted: no variable expansion of the content. */
  expand: boolean;
}

interface At {
  /** 1-based line of the instruction's first line; `endLine` its last (continuations, heredocs). */
  line: number;
  endLine: number;
  /** The instruction as written, continuations joined (what `Step N/M : …` prints). */
  original: string;
}

/** A `RUN --mount=…` (raw values; the executor expands and validates sources). */
export interface RunMount {
  type: 'bind' | 'cache' | 'tmpfs' | 'secret' | 'ssh';
  target: string;
  source?: string;
  /** A stage name or index, or an image, to take `source` from (bind, cache). */
  from?: string;
  readonly: boolean;
  /** cache: the cache's id (default: the target); sharing shared|private|locked. */
  id?: string;
  sharing?: 'shared' | 'private' | 'locked';
  mode?: number;
  uid?: number;
  gid?: number;
  /** tmpfs: size in bytes. */
  size?: number;
}

export type Instruction = At &
  (
    | { kind: 'env' | 'label'; pairs: Array<[string, string]> }
    | { kind: 'maintainer'; value: string }
    | { kind: 'expose'; ports: string[] }
    | { kind: 'arg'; args: Array<{ name: string; value?: string }> }
    | { kind: 'workdir' | 'user' | 'stopsignal'; value: string }
    | { kind: 'volume'; volumes: string[] }
    | { kind: 'shell'; shell: string[] }
    | { kind: 'cmd' | 'entrypoint'; cmdLine: string[]; prependShell: boolean }
    | { kind: 'healthcheck'; health: HealthConfig }
    /** `expression`: the trigger as written after ONBUILD (re-parsed when a child build runs it). */
    | { kind: 'onbuild'; expression: string }
    | {
        kind: 'run';
        /** Shell form: one string, run with the stage's SHELL (`prependShell`). Exec form: argv. */
        cmdLine: string[];
        prependShell: boolean;
        heredocs: Heredoc[];
        mounts: RunMount[];
        network?: 'default' | 'none' | 'host';
      }
    | {
        kind: 'copy' | 'add';
        /** Sources as written (context paths, wildcards, URLs for ADD); heredoc names appear as `<<EOF`. */
        sources: string[];
        dest: string;
        heredocs: Heredoc[];
        /** `--from=` a stage name/index or an image. */
        from?: string;
        chown?: string;
        chmod?: string;
        link: boolean;
        parents: boolean;
        /** ADD only: `--checksum=sha256:…` for URLs; `--keep-git-dir`. */
        checksum?: string;
        exclude: string[];
      }
  );

export interface Stage {
  /** 0-based position; `name` from `AS name` (lower-cased). */
  index: number;
  name?: string;
  /** FROM's image word, raw (expand with the meta ARGs). */
  base: string;
  platform?: string;
  line: number;
  original: string;
  instructions: Instruction[];
}

export interface ParsedDockerfile {
  /** ARGs before the first FROM. */
  metaArgs: Array<{ name: string; value?: string }>;
  /** The ARG instructions before the first FROM, as written (each is a `Step N/M : ARG …`). */
  metaArgInstructions?: Instruction[];
  stages: Stage[];
  escapeToken: string;
  /** The `# syntax=` directive, when given. */
  syntax?: string;
  /** Warnings to show the user (e.g. empty continuation lines). */
  warnings: string[];
}

// ---------------------------------------------------------------- the context

/** A context received into a directory of the engine's. */
export interface BuildContext {
  /** The directory with the context's files (`.dockerignore`d files are not there). */
  root: string;
  /** The Dockerfile's text and where it came from (a context path, or `-` for stdin/remote). */
  dockerfile: string;
  dockerfilePath: string;
  /** The `.dockerignore` patterns in force (for COPY's error messages and --exclude). */
  ignore: string[];
  /**
   * The content digests of the context's regular files, taken as the tar was extracted (the
   * bytes pass through the engine once): COPY's checksum uses them rather than reading the files
   * again.
   */
  digests?: ContentDigests;
  /**
   * Every file's content on disk: large files' contents may be held in memory until something
   * reads the context's files (a build whose steps all come from the cache never does). Awaited
   * before any read of their contents; once, later calls share it.
   */
  contents(): Promise<void>;
  /**
   * Removes every file of the context; safe to call twice. `keep`: its large files go to the
   * engine's store of context sources first (a later build's equal ones are compared with them
   * rather than hashed).
   */
  cleanup(opts?: { keep?: boolean }): Promise<void>;
}

/** A file's content digest as it was written: its inode, size and time must still be the same. */
export interface KnownDigest {
  size: number;
  mtimeNs: bigint;
  /** sha256 of the content, hex. */
  sha256: string;
}

/** Content digests by inode (`<dev>:<ino>`); a hard link shares its file's. */
export type ContentDigests = ReadonlyMap<string, KnownDigest>;

/** One file or directory COPY/ADD takes, resolved in the context (or a stage's / image's filesystem). */
export interface CopySource {
  /** Absolute path on the host. */
  hostPath: string;
  /** The path as matched, relative to its root (for `--parents` and messages). */
  relPath: string;
  isDir: boolean;
}

/** What the executor asks to copy: where it lands in the container and who owns it. */
export interface CopyPlan {
  sources: CopySource[];
  /** In-memory files (heredocs, downloaded URLs): name → content. */
  inline: Array<{ name: string; content: Buffer; mode?: number; mtime?: Date }>;
  /** Absolute destination in the container (WORKDIR applied). */
  dest: string;
  /** Whether `dest` names a directory (ends in `/`, several sources, or exists as one). */
  destIsDir: boolean;
  uid: number;
  gid: number;
  /** `--chmod` as a number; undefined keeps the source's mode. */
  mode?: number;
  parents: boolean;
  /** ADD: local tar archives are extracted at dest instead of copied. */
  extractArchives: boolean;
  /**
   * The deepest directory on `dest`'s path that exists in the container (`dest` itself when it is
   * an existing directory). The tar makes the directories below it (0755, owned uid:gid, as
   * dockerd's MkdirAllAndChownNew) and has no entry for it or those above, which stay as they
   * are. Default `/`: every directory on the way gets an entry.
   */
  existingDir?: string;
  /** `--exclude` patterns, matched in directory sources against paths below the directory. */
  exclude?: string[];
}

/** A tar (rooted at `/`) of a copy, to be extracted into a container's filesystem. */
export type CopyTar = Readable;
