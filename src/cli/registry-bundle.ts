import { statSync } from 'node:fs';

/**
 * The registry command's bundle (scripts/bundle-registry.sh, part of `npm run build`), when the
 * build made one from the current compile: a serving registry then loads one module and a few
 * shared chunks instead of ~60 modules, ~4 MiB less idle RSS. Undefined when there is none (run
 * from src) or when it is older than tsc's output (a bare `tsc` after the last build: the bundle
 * would run stale code), and the command is loaded from the module tree.
 *
 * @param cliDir the directory of the compiled CLI modules (a URL ending in '/').
 */
export function registryBundle(cliDir: URL): URL | undefined {
  const bundle = new URL('../registry-bundle/registry.command.js', cliDir);
  const bundled = mtimeOf(bundle);
  const compiled = mtimeOf(new URL('registry.command.js', cliDir));
  return bundled !== undefined && compiled !== undefined && bundled >= compiled ? bundle : undefined;
}

function mtimeOf(file: URL): number | undefined {
  return statSync(file, { throwIfNoEntry: false })?.mtimeMs;
}
