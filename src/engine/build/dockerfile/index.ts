/** The build's front end (see build.types.ts): parsing, expansion, stage selection, history text. */
export { parseBuildDockerfile } from './parse.js';
