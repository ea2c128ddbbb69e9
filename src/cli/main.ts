import { errorMessage } from '../common/errors.js';
import { BERTH_VERSION } from '../common/version.js';
import { UsageError } from './args.js';
import { registryBundle } from './registry-bundle.js';

const help = `berth ${BERTH_VERSION}: a Docker-compatible container engine and an OCI image registry

Usage: berth <command> [flags]

Commands:
  engine     run the engine daemon (Docker Engine API on a unix socket)
  registry   run the image registry (Registry HTTP API V2 / OCI distribution); 'registry gc' collects garbage
  up         run the engine with defaults (seeds busybox:latest on a fresh data root)
  version    print the version

Run 'berth <command> --help' for a command's flags.`;

/** Commands are loaded when used, so a registry process does not carry the engine's modules. */
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'engine':
      return (await import('./engine.command.js')).runEngineCommand(rest);
    case 'up':
      return (await import('./up.command.js')).runUpCommand(rest);
    case 'registry': {
      const bundle = registryBundle(new URL('./', import.meta.url));
      const command: typeof import('./registry.command.js') = bundle
        ? await import(bundle.href)
        : await import('./registry.command.js');
      return command.runRegistryCommand(rest);
    }
    case 'version':
    case '--version':
      process.stdout.write(`berth ${BERTH_VERSION}\n`);
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${help}\n`);
      return 0;
    default:
      process.stderr.write(`berth: unknown command ${JSON.stringify(command)}\n\n${help}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`berth: ${errorMessage(err)}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
