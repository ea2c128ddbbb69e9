import { invalidParameter } from '../../../common/errors.js';
import { goQuote } from '../../images/dockerfile/go-text.js';
import {
  buildEnvs,
  LexError,
  processWord,
  processWords,
  ShellWord,
} from '../../images/dockerfile/shell-words.js';
import type { Instruction, RunMount, Stage } from '../build.types.js';

/**
 * Variable expansion of build instructions, as dockerd's dispatcher does it: `env` is a list of
 * `NAME=value` lines (the stage's config Env, then the ARGs in scope); the first line of a name
 * wins, so ENV shadows an ARG of the same name.
 */

const firstWins = (env: readonly string[]): string[] => {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const e of env) {
    const eq = e.indexOf('=');
    const name = eq < 0 ? e : e.slice(0, eq);
    if (seen.has(name)) continue;
    seen.add(name);
    out.push(e);
  }
  return out;
};

/** The lexer's ProcessWord: quotes and escapes resolved, variables substituted, one word. */
export function expandWord(word: string, env: readonly string[], escapeToken: string): string {
  return processWord(word, firstWins(env), escapeToken, true);
}

/** The lexer's ProcessWords: as expandWord, then split into words (quoted parts stay whole). */
export function expandWords(word: string, env: readonly string[], escapeToken: string): string[] {
  return processWords(word, firstWins(env), escapeToken, true);
}

/** A heredoc body with `expand`: variables substituted, quotes kept as written. */
export function expandHeredoc(content: string, env: readonly string[], escapeToken: string): string {
  try {
    return new ShellWord(content, buildEnvs(firstWins(env)), escapeToken, true).processHeredoc();
  } catch (err) {
    if (err instanceof LexError)
      throw invalidParameter(`failed to process ${goQuote(content)}: ${err.message}`);
    throw err;
  }
}

/** FROM's image word and platform, expanded with the meta ARGs (`NAME=value`, --build-arg applied). */
export function expandFrom(stage: Stage, metaEnv: readonly string[], escapeToken: string) {
  const base = expandWord(stage.base, metaEnv, escapeToken);
  if (base === '') throw invalidParameter(`base name (${stage.base}) should not be blank`);
  const platform =
    stage.platform === undefined ? undefined : expandWord(stage.platform, metaEnv, escapeToken);
  return { base, ...(platform !== undefined ? { platform } : {}) };
}

function expandMount(m: RunMount, x: (w: string) => string): RunMount {
  return {
    ...m,
    target: x(m.target),
    ...(m.source !== undefined ? { source: x(m.source) } : {}),
    ...(m.from !== undefined ? { from: x(m.from) } : {}),
    ...(m.id !== undefined ? { id: x(m.id) } : {}),
  };
}

/**
 * An instruction with the words dockerd expands expanded: ENV and LABEL names and values, ARG
 * names and defaults, COPY/ADD sources (not heredoc names), destination and flags, heredoc bodies
 * that allow it (COPY/ADD only: a RUN's shell expands its own), EXPOSE (each word may become
 * several ports), WORKDIR, USER, STOPSIGNAL, VOLUME, RUN's mount values. CMD, ENTRYPOINT, RUN's
 * command, SHELL, HEALTHCHECK, MAINTAINER and ONBUILD are used as written.
 */
export function expandInstruction(
  instr: Instruction,
  env: readonly string[],
  escapeToken: string,
): Instruction {
  const x = (w: string): string => expandWord(w, env, escapeToken);
  switch (instr.kind) {
    case 'env':
    case 'label':
      return { ...instr, pairs: instr.pairs.map(([k, v]) => [x(k), x(v)]) };
    case 'arg':
      return {
        ...instr,
        args: instr.args.map((a) =>
          a.value === undefined ? { name: x(a.name) } : { name: x(a.name), value: x(a.value) },
        ),
      };
    case 'expose':
      return { ...instr, ports: instr.ports.flatMap((p) => expandWords(p, env, escapeToken)) };
    case 'workdir':
    case 'user':
    case 'stopsignal':
      return { ...instr, value: x(instr.value) };
    case 'volume':
      return {
        ...instr,
        volumes: instr.volumes.map((v) => {
          const out = x(v);
          if (out === '') throw invalidParameter('VOLUME specified can not be an empty string');
          return out;
        }),
      };
    case 'copy':
    case 'add': {
      const heredocNames = new Set(instr.heredocs.map((h) => `<<${h.name}`));
      return {
        ...instr,
        sources: instr.sources.map((s) => (heredocNames.has(s) ? s : x(s))),
        dest: x(instr.dest),
        heredocs: instr.heredocs.map((h) =>
          h.expand ? { ...h, content: expandHeredoc(h.content, env, escapeToken) } : h,
        ),
        ...(instr.from !== undefined ? { from: x(instr.from) } : {}),
        ...(instr.chown !== undefined ? { chown: x(instr.chown) } : {}),
        ...(instr.chmod !== undefined ? { chmod: x(instr.chmod) } : {}),
        ...(instr.checksum !== undefined ? { checksum: x(instr.checksum) } : {}),
        exclude: instr.exclude.map(x),
      };
    }
    case 'run':
      return { ...instr, mounts: instr.mounts.map((m) => expandMount(m, x)) };
    default:
      return instr;
  }
}
