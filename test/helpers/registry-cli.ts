/** Entry point for tests: `node --import tsx test/helpers/registry-cli.ts <berth registry args>`. */
import { runRegistryCommand } from '../../src/cli/registry.command.js';

process.exitCode = await runRegistryCommand(process.argv.slice(2));
