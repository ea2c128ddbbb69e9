import { parseHeredocWord } from '../../images/dockerfile/scan.js';
import type { Instruction } from '../build.types.js';
import { DEFAULT_SHELL, resolveCmdLine } from './history.js';

/** What a RUN executes, heredocs included, as buildkit's dispatcher builds it. */
export interface RunCommand {
  argv: string[];
  /** `RUN <<EOF` whose body starts with `#!`: write it (mode 0755) at `path` in the container and run it. */
  script?: { path: string; content: string };
}

export const HEREDOC_SCRIPT_DIR = '/dev/pipes';

/**
 * RUN's argv with the stage's shell. `RUN <<EOF` alone runs the body with the shell (or, with a
 * `#!` line, as a script file); a heredoc within a command is handed to the shell whole (the
 * command line, then each body and its terminator).
 */
export function runCommand(
  instr: Extract<Instruction, { kind: 'run' }>,
  shell: readonly string[] = DEFAULT_SHELL,
): RunCommand {
  const [first, ...rest] = instr.heredocs;
  const line = instr.cmdLine[0];
  if (!first || !instr.prependShell || instr.cmdLine.length !== 1 || line === undefined) {
    return { argv: resolveCmdLine(instr, shell) ?? [] };
  }
  if (rest.length === 0 && parseHeredocWord(line)) {
    if (first.content.startsWith('#!')) {
      const path = `${HEREDOC_SCRIPT_DIR}/${first.name}`;
      return { argv: [...shell, path], script: { path, content: first.content } };
    }
    return { argv: [...shell, first.content] };
  }
  let full = line;
  for (const h of instr.heredocs) full += `\n${h.content}${h.name}`;
  return { argv: [...shell, full] };
}
