import { invalidParameter } from '../../common/errors.js';
import { processWord, processWords } from '../images/dockerfile/shell-words.js';
import type { ParsedDockerfile, Stage } from './build.types.js';
import type { DockerfileSupport } from './builder.ports.js';
import { parseBuildDockerfile } from './dockerfile/index.js';

/** A stage's index by name or number among those before `before` (FROM <stage>, --from=<stage>). */
function stageIndex(parsed: ParsedDockerfile, ref: string, before: number): number | undefined {
  const lower = ref.toLowerCase();
  for (const s of parsed.stages) {
    if (s.index >= before) break;
    if (s.name === lower || String(s.index) === ref) return s.index;
  }
  return undefined;
}

/**
 * The stages a target needs: the target (the last stage by default) and, transitively, the
 * stages its FROM, COPY --from and RUN --mount from= name; in Dockerfile order.
 */
export function stagesFor(parsed: ParsedDockerfile, target?: string): Stage[] {
  let last = parsed.stages.length - 1;
  if (target) {
    const t = parsed.stages.find((s) => s.name === target.toLowerCase());
    if (!t) throw invalidParameter(`failed to reach build target ${target} in Dockerfile`);
    last = t.index;
  }
  const need = new Set<number>();
  const visit = (i: number) => {
    if (need.has(i)) return;
    need.add(i);
    const s = parsed.stages[i] as Stage;
    const refs = [s.base];
    for (const ins of s.instructions) {
      if ((ins.kind === 'copy' || ins.kind === 'add') && ins.from) refs.push(ins.from);
      if (ins.kind === 'run') for (const m of ins.mounts) if (m.from) refs.push(m.from);
    }
    for (const r of refs) {
      const j = stageIndex(parsed, r, i);
      if (j !== undefined) visit(j);
    }
  };
  visit(last);
  return parsed.stages.filter((s) => need.has(s.index));
}

/** `Step N/M`'s M: the meta ARGs, then each stage's FROM and instructions. */
export function stepCount(parsed: ParsedDockerfile, stages: Stage[]): number {
  return (
    (parsed.metaArgInstructions?.length ?? 0) + stages.reduce((n, s) => n + 1 + s.instructions.length, 0)
  );
}

/** The front end as the builder uses it. */
export const dockerfileSupport: DockerfileSupport = {
  parse: parseBuildDockerfile,
  expandWord: (word, env, escapeToken) => processWord(word, env, escapeToken),
  expandWords: (word, env, escapeToken) => processWords(word, env, escapeToken),
  stagesFor,
  stepCount,
};
