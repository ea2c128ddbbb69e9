import { errorMessage } from '../common/errors.js';
import { loadConfig, type RegistryConfig } from '../registry/config.js';
import { collectGarbage } from '../registry/gc/gc.js';
import { FilesystemDriver } from '../registry/storage/filesystem.driver.js';
import { bool, type FlagSpec, parseArgs, parseDuration, str, UsageError, usage } from './args.js';

const spec: Record<string, FlagSpec> = {
  config: {
    kind: 'string',
    help: 'registry config file (config.yml schema); its storage.filesystem.rootdirectory is collected',
  },
  root: { kind: 'string', help: 'storage root directory (overrides the config file)' },
  'dry-run': { kind: 'bool', help: 'print what would be deleted, delete nothing' },
  'delete-untagged': {
    kind: 'bool',
    help: 'delete manifests not reachable from a tag (and their referrers) first',
  },
  'grace-period': {
    kind: 'string',
    help: 'never delete blobs or manifests younger than this (e.g. 30s, 10m, 1h, 0s; default 1h)',
  },
  quiet: { kind: 'bool', help: 'print only the summary' },
  json: { kind: 'bool', help: 'print the report as JSON' },
  help: { kind: 'bool', help: 'show this help' },
};

/** `berth registry gc [--config file] [--root dir] [--dry-run] [--delete-untagged]`. Returns the exit code. */
export async function runGc(argv: string[]): Promise<number> {
  // The reference registry's short flags and its positional config file are accepted too.
  const normalized = argv.map((a) => (a === '-d' ? '--dry-run' : a === '-m' ? '--delete-untagged' : a));
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(normalized, spec);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`berth registry gc: ${err.message}\n\n${usage('registry gc', spec)}\n`);
      return 2;
    }
    throw err;
  }
  if (bool(parsed, 'help')) {
    process.stdout.write(`${usage('registry gc', spec)}\n`);
    return 0;
  }
  if (parsed.positional.length > 1) {
    process.stderr.write(`berth registry gc: unexpected arguments ${parsed.positional.slice(1).join(' ')}\n`);
    return 2;
  }
  const configPath = str(parsed, 'config') ?? parsed.positional[0];
  let root = str(parsed, 'root');
  try {
    if (!root && configPath) root = await rootFromConfig(configPath);
    root ??= process.env.REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY;
    if (!root) throw new UsageError('say which storage to collect: --root dir or --config file');
    const graceText = str(parsed, 'grace-period');
    const gracePeriodMs = graceText === undefined ? undefined : parseDuration(graceText);
    const quiet = bool(parsed, 'quiet') || bool(parsed, 'json');
    const report = await collectGarbage(new FilesystemDriver(root), {
      dryRun: bool(parsed, 'dry-run'),
      deleteUntagged: bool(parsed, 'delete-untagged'),
      gracePeriodMs,
      log: quiet ? undefined : (line) => process.stdout.write(`${line}\n`),
    });
    if (bool(parsed, 'json')) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return 0;
    }
    const verb = report.dryRun ? 'eligible for deletion' : 'deleted';
    process.stdout.write(
      `\n${report.markedBlobs} blobs marked, ${report.deletedBlobs.length} blobs and ${report.deletedManifests.length} manifests ${verb}` +
        ` (${formatBytes(report.bytesFreed)}), ${report.deletedLayerLinks.length} stale layer links ${verb},` +
        ` ${report.keptYoung.length} unreferenced blobs kept as younger than ${report.cutoff.toISOString()},` +
        ` ${report.leftovers.temporary.length} temporary files of killed writes and ${report.leftovers.deadTags.length} tags without a manifest ${verb}\n`,
    );
    for (const w of report.warnings) process.stderr.write(`warning: ${w}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`berth registry gc: ${errorMessage(err)}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

/**
 * The filesystem root directory of a registry config file (the registry's own loader, so both
 * read the same file the same way; REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY overrides it, as
 * for the reference registry). Read-only mode (storage.maintenance.readonly) does not stop a
 * collection: collecting while the registry refuses writes is what read-only mode is for.
 */
export async function rootFromConfig(path: string): Promise<string> {
  let config: RegistryConfig;
  try {
    config = await loadConfig(path);
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
  return process.env.REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY || config.storage.filesystem.rootdirectory;
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
