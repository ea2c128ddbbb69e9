import { invalidParameter } from '../../../common/errors.js';
import type { ParsedDockerfile, Stage } from '../build.types.js';
import { expandWord } from './expand.js';

/** Which stages a build target needs, and dockerd's step count over them. */

/** The meta ARGs with their defaults as `NAME=value` lines (each default expanded with the earlier ones). */
export function metaArgEnv(
  parsed: ParsedDockerfile,
  buildArgs: ReadonlyMap<string, string> = new Map(),
): string[] {
  const env: string[] = [];
  for (const arg of parsed.metaArgs) {
    const given = buildArgs.get(arg.name);
    if (given !== undefined) env.unshift(`${arg.name}=${given}`);
    else if (arg.value !== undefined)
      env.unshift(`${arg.name}=${expandWord(arg.value, env, parsed.escapeToken)}`);
  }
  return env;
}

/** The stage a name (case-insensitive) or an index names, among the stages before `before`. */
export function findStage(parsed: ParsedDockerfile, ref: string, before: number): Stage | undefined {
  const lower = ref.toLowerCase();
  const named = parsed.stages.find((s) => s.index < before && s.name === lower);
  if (named) return named;
  if (/^\d+$/.test(ref)) {
    const i = Number(ref);
    if (i < before) return parsed.stages[i];
  }
  return undefined;
}

/** The stage names a stage refers to: its FROM, `COPY --from`, `RUN --mount from=`. */
function references(stage: Stage, expand: (w: string) => string): string[] {
  const refs = [expand(stage.base)];
  for (const i of stage.instructions) {
    if (i.kind === 'copy' && i.from !== undefined) refs.push(expand(i.from));
    if (i.kind === 'run') for (const m of i.mounts) if (m.from !== undefined) refs.push(expand(m.from));
  }
  return refs;
}

/**
 * The stages `target` (a stage name, case-insensitive; default the last stage) needs, in file
 * order: the target and, transitively, the stages its FROM, `COPY --from` and `RUN --mount
 * from=` name (by name or index). Words are expanded with the meta ARGs (`metaEnv`, default their
 * defaults); a reference that names no earlier stage is an image.
 */
export function stagesFor(parsed: ParsedDockerfile, target?: string, metaEnv?: readonly string[]): Stage[] {
  let last: Stage | undefined;
  if (target === undefined || target === '') last = parsed.stages[parsed.stages.length - 1];
  else last = parsed.stages.find((s) => s.name === target.toLowerCase());
  if (!last) throw invalidParameter(`failed to reach build target ${target} in Dockerfile`);
  const env = metaEnv ?? metaArgEnv(parsed);
  const expand = (w: string): string => {
    try {
      return expandWord(w, env, parsed.escapeToken);
    } catch {
      return w;
    }
  };
  const needed = new Set<number>();
  const visit = (stage: Stage): void => {
    if (needed.has(stage.index)) return;
    needed.add(stage.index);
    for (const ref of references(stage, expand)) {
      const dep = findStage(parsed, ref, stage.index);
      if (dep) visit(dep);
    }
  };
  visit(last);
  return parsed.stages.filter((s) => needed.has(s.index));
}

/** M of `Step N/M`: the ARGs before FROM, then each needed stage's FROM and instructions. */
export function stepCount(parsed: ParsedDockerfile, stages: readonly Stage[]): number {
  const meta = parsed.metaArgInstructions?.length ?? parsed.metaArgs.length;
  return stages.reduce((n, s) => n + 1 + s.instructions.length, meta);
}
