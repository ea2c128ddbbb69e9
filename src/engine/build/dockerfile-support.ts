import type { DockerfileSupport } from './builder.ports.js';
import {
  copyHistory,
  expandFrom,
  expandInstruction,
  expandWord,
  findStage,
  metaArgEnv,
  nopHistory,
  parseBuildDockerfile,
  parseOnbuildTriggers,
  resolveWorkdir,
  runCommand,
  runHistoryCmd,
  stagesFor,
  stepCount,
} from './dockerfile/index.js';

/** The front end as the builder uses it. */
export const dockerfileSupport: DockerfileSupport = {
  parse: parseBuildDockerfile,
  expandWord,
  expandInstruction,
  expandFrom,
  metaArgEnv,
  findStage,
  stagesFor,
  stepCount,
  nopHistory,
  copyHistory,
  runCommand,
  runHistoryCmd,
  resolveWorkdir,
  parseOnbuildTriggers,
};
