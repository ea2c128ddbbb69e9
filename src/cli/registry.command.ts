import { errorMessage } from '../common/errors.js';
import { parseLogLevel, rootLogger } from '../common/log.js';
import { ConfigError, configFromEnv, loadConfig, type RegistryConfig } from '../registry/config.js';
import { startRegistry } from '../registry/index.js';
import { type FlagSpec, parseArgs, str, UsageError, untilSignal, usage } from './args.js';

// ---- `berth registry gc` dispatch: garbage collection lives in src/registry/gc (its own owner).

const spec: Record<string, FlagSpec> = {
  addr: { kind: 'string', help: 'listen address host:port (default 127.0.0.1:5000; overrides http.addr)' },
  root: {
    kind: 'string',
    help: 'storage root directory (default /var/lib/berth/registry; overrides storage.filesystem.rootdirectory)',
  },
  config: {
    kind: 'string',
    help: "configuration file: the reference registry's config.yml schema, YAML or JSON",
  },
  'log-level': { kind: 'string', help: 'debug, info, warn or error (overrides log.level)' },
  help: { kind: 'bool', help: 'show this help' },
};

const HELP = `${usage('registry', spec)}

Configuration: the file, then REGISTRY_<SECTION>_<KEY> environment variables (as the reference
registry: REGISTRY_HTTP_ADDR, REGISTRY_STORAGE_DELETE_ENABLED=true, ...), then the flags.

Subcommands:
  berth registry [serve] [flags] [config.yml]   serve the Registry HTTP API V2 (the default)
  berth registry gc [flags]                     garbage-collect unreferenced blobs (see --help)`;

/** `berth registry ...`: serve the registry until SIGTERM/SIGINT, or run a subcommand. Returns the exit code. */
export async function runRegistryCommand(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  // The collector is loaded only for `gc` (a serving registry does not carry it: idle RSS).
  if (first === 'gc') return (await import('./registry-gc.command.js')).runGc(rest);
  const args = first === 'serve' ? rest : argv;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(args, spec);
    if (parsed.positional.length > 1)
      throw new UsageError(`unexpected arguments: ${parsed.positional.join(' ')}`);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`berth registry: ${err.message}\n\n${HELP}\n`);
      return 2;
    }
    throw err;
  }
  if (parsed.flags.get('help') === true) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  let config: RegistryConfig;
  try {
    const path = str(parsed, 'config') ?? parsed.positional[0];
    config = path ? await loadConfig(path, process.env) : configFromEnv(process.env);
    const addr = str(parsed, 'addr');
    const root = str(parsed, 'root');
    const level = str(parsed, 'log-level');
    if (addr) config.http.addr = addr;
    if (root) config.storage.filesystem.rootdirectory = root;
    if (level) config.log.level = parseLogLevel(level);
  } catch (err) {
    process.stderr.write(`berth registry: ${errorMessage(err)}\n`);
    return err instanceof ConfigError ? 2 : 1;
  }
  rootLogger.setLevel(config.log.level);
  let running: Awaited<ReturnType<typeof startRegistry>>;
  try {
    running = await startRegistry(config);
  } catch (err) {
    process.stderr.write(`berth registry: cannot start: ${errorMessage(err)}\n`);
    return 1;
  }
  process.stderr.write(
    `berth registry: serving ${running.url} (storage ${config.storage.filesystem.rootdirectory})\n`,
  );
  const signal = await untilSignal();
  rootLogger.info('shutting down', { signal });
  await running.close();
  return 0;
}
