/**
 * The build's front end (see build.types.ts), the one import point of the executor:
 * - parseBuildDockerfile(text): meta ARGs and stages of typed, unexpanded instructions; every
 *   syntax error is an invalidParameter `dockerfile parse error line N: …` raised before anything
 *   runs. `Step N/M : <text>` prints `instruction.original` (a stage's FROM: `stage.original`).
 * - expandWord / expandWords / expandInstruction / expandFrom / expandHeredoc: variable expansion
 *   with env = `NAME=value` lines (config Env first, then the ARGs in scope; the first wins).
 * - stagesFor / stepCount / metaArgEnv / findStage: which stages a target needs, dockerd's M.
 * - nopHistory / copyHistory / runHistoryCmd / resolveCmdLine / resolveWorkdir: dockerd's texts
 *   and command lines.
 * - runCommand: RUN's argv with heredocs (and the script file of `RUN <<EOF` with `#!`).
 * - parseOnbuildTriggers: a base image's ONBUILD triggers as instructions.
 * - isBuiltinSyntax: whether `# syntax=` names the built-in Dockerfile frontend.
 */
export { expandFrom, expandHeredoc, expandInstruction, expandWord, expandWords } from './expand.js';
export {
  copyHistory,
  DEFAULT_SHELL,
  nopHistory,
  resolveCmdLine,
  resolveWorkdir,
  runHistoryCmd,
} from './history.js';
export { parseRunMount } from './mounts.js';
export { isBuiltinSyntax, parseBuildDockerfile, parseOnbuildTriggers } from './parse.js';
export { HEREDOC_SCRIPT_DIR, type RunCommand, runCommand } from './run-command.js';
export { findStage, metaArgEnv, stagesFor, stepCount } from './stages.js';
