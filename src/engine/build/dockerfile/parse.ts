import { invalidParameter, isBerthError } from '../../../common/errors.js';
import { trimSpace } from '../../images/dockerfile/go-text.js';
import { lineError, type ScannedNode, scanDockerfile } from '../../images/dockerfile/scan.js';
import type { Instruction, ParsedDockerfile, Stage } from '../build.types.js';
import { parseFrom, parseInstruction } from './instructions.js';

/** The build's front end: Dockerfile text → meta ARGs and stages of typed, unexpanded instructions. Every error is raised here, before any step runs. */

const located = (err: unknown): boolean =>
  isBerthError(err) && err.message.startsWith('dockerfile parse error line ');

/** An instruction whose `original` is what `Step N/M : …` prints: the line trimmed (moby's withNameAndCode); ONBUILD keeps its trigger as written. */
function stepInstruction(node: ScannedNode): Instruction {
  return { ...parseInstruction(node), original: trimSpace(node.original) };
}

export function parseBuildDockerfile(text: string): ParsedDockerfile {
  const scan = scanDockerfile(text, { heredocs: true, lineErrors: true });
  const metaArgs: ParsedDockerfile['metaArgs'] = [];
  const metaArgInstructions: Instruction[] = [];
  const stages: Stage[] = [];
  const names = new Set<string>();
  for (const node of scan.nodes) {
    let noStage = false;
    try {
      if (node.value === 'from') {
        const from = parseFrom(node);
        if (from.name !== undefined) {
          if (names.has(from.name)) throw invalidParameter(`${from.name} stage name already used`);
          names.add(from.name);
        }
        stages.push({
          index: stages.length,
          ...from,
          line: node.startLine,
          original: trimSpace(node.original),
          instructions: [],
        });
        continue;
      }
      const instruction = stepInstruction(node);
      const stage = stages[stages.length - 1];
      if (stage) {
        stage.instructions.push(instruction);
      } else if (instruction.kind === 'arg') {
        metaArgs.push(...instruction.args);
        metaArgInstructions.push(instruction);
      } else {
        noStage = true;
      }
    } catch (err) {
      throw located(err) ? err : lineError(node.startLine, err);
    }
    // dockerd's words, without a line (as it answers).
    if (noStage) throw invalidParameter('no build stage in current context');
  }
  if (stages.length === 0) throw invalidParameter('dockerfile contains no stages to build');
  return {
    metaArgs,
    metaArgInstructions,
    stages,
    escapeToken: scan.escapeToken,
    ...(scan.syntax !== undefined ? { syntax: scan.syntax } : {}),
    warnings: scan.warnings,
  };
}

/**
 * The ONBUILD triggers of a base image (its config's OnBuild, each as ONBUILD wrote it) as
 * instructions to run right after FROM, refused as dockerd does when one is ONBUILD, FROM or
 * MAINTAINER.
 */
export function parseOnbuildTriggers(triggers: readonly string[]): Instruction[] {
  const out: Instruction[] = [];
  for (const trigger of triggers) {
    for (const node of scanDockerfile(trigger, { heredocs: true, lineErrors: false }).nodes) {
      const upper = node.value.toUpperCase();
      if (upper === 'ONBUILD') throw invalidParameter("Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed");
      if (upper === 'MAINTAINER' || upper === 'FROM')
        throw invalidParameter(`${upper} isn't allowed as an ONBUILD trigger`);
      out.push(stepInstruction(node));
    }
  }
  return out;
}

/**
 * Whether a `# syntax=` directive names the Dockerfile frontend berth has built in
 * (`docker/dockerfile` — any 1.x version or channel, `-labs`, a digest — with or without
 * `docker.io/`); another frontend image cannot run here.
 */
export function isBuiltinSyntax(syntax: string): boolean {
  const ref = syntax.trim().replace(/^(docker\.io|index\.docker\.io|registry-1\.docker\.io)\//, '');
  return /^docker\/dockerfile(-upstream)?(:(1([.-][0-9a-z.-]*)?|latest|labs|experimental))?(@sha256:[0-9a-f]{64})?$/.test(
    ref,
  );
}
