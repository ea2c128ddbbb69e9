import { invalidParameter, isBerthError } from '../../../common/errors.js';
import { lineError, scanDockerfile } from '../../images/dockerfile/parser.js';
import type { Instruction, ParsedDockerfile, Stage } from '../build.types.js';
import { parseFrom, parseInstruction } from './instructions.js';

/** The build's front end: Dockerfile text → meta ARGs and stages of typed, unexpanded instructions. Every error is raised here, before any step runs. */

const located = (err: unknown): boolean =>
  isBerthError(err) && err.message.startsWith('dockerfile parse error line ');

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
          original: node.original,
          instructions: [],
        });
        continue;
      }
      const instruction = parseInstruction(node);
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
