import { errorMessage } from '../common/errors.js';
import { parseLogLevel, rootLogger } from '../common/log.js';
import { defaultEngineConfig, type EngineConfig, parseRuntimeName } from '../engine/config.js';
import { parseRamSize } from '../engine/containers/core/units.js';
import { startEngine } from '../engine/daemon.js';
import {
  bool,
  type FlagSpec,
  list,
  type Parsed,
  parseArgs,
  str,
  UsageError,
  untilSignal,
  usage,
} from './args.js';

export const engineFlags: Record<string, FlagSpec> = {
  host: {
    kind: 'list',
    help: 'listen address, unix:///path or tcp://host:port (default unix:///run/berth/berth.sock)',
  },
  'data-root': { kind: 'string', help: 'root of persistent state (default /var/lib/berth)' },
  'exec-root': { kind: 'string', help: 'root of runtime state (default /run/berth)' },
  runtime: { kind: 'string', help: 'OCI runtime: runc or crun (default runc)' },
  'log-level': { kind: 'string', help: 'debug, info, warn or error (default info)' },
  'insecure-registry': { kind: 'list', help: 'registry reached over plain HTTP (host:port or CIDR)' },
  experimental: { kind: 'bool', help: 'enable experimental features' },
  bridge: {
    kind: 'string',
    short: 'b',
    help: "the default bridge's name (default berth0; created when missing); none: no default bridge",
  },
  bip: { kind: 'string', help: "the default bridge's address and prefix length, as 172.30.0.1/16" },
  'copy-upload-limit': {
    kind: 'string',
    help: 'the largest archive docker cp may upload, as 512m or 2g (default 10g; 413 beyond it)',
  },
  help: { kind: 'bool', help: 'print this help' },
};

function copyUploadLimit(value: string | undefined): number {
  if (value === undefined) return defaultEngineConfig.copyUploadLimit;
  let bytes: number;
  try {
    bytes = parseRamSize(value, '--copy-upload-limit');
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
  if (bytes < 1) throw new UsageError(`--copy-upload-limit must be at least 1 byte: ${value}`);
  return bytes;
}

export function engineConfigFrom(p: Parsed): EngineConfig {
  const logLevel = str(p, 'log-level');
  const runtime = str(p, 'runtime');
  return {
    hosts: list(p, 'host') ?? defaultEngineConfig.hosts,
    dataRoot: str(p, 'data-root') ?? defaultEngineConfig.dataRoot,
    execRoot: str(p, 'exec-root') ?? defaultEngineConfig.execRoot,
    runtime: runtime ? parseRuntimeName(runtime) : defaultEngineConfig.runtime,
    logLevel: logLevel ? parseLogLevel(logLevel) : defaultEngineConfig.logLevel,
    insecureRegistries: [...defaultEngineConfig.insecureRegistries, ...(list(p, 'insecure-registry') ?? [])],
    experimental: bool(p, 'experimental'),
    bridge: str(p, 'bridge') ?? defaultEngineConfig.bridge,
    ...(str(p, 'bip') ? { bip: str(p, 'bip') } : {}),
    copyUploadLimit: copyUploadLimit(str(p, 'copy-upload-limit')),
  };
}

export async function runEngineCommand(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv, engineFlags);
  if (bool(parsed, 'help')) {
    process.stdout.write(`${usage('engine', engineFlags)}\n`);
    return 0;
  }
  const config = engineConfigFrom(parsed);
  rootLogger.setLevel(config.logLevel);
  const engine = await startEngine(config, rootLogger.child('engine'));
  const sig = await untilSignal();
  rootLogger.info('shutting down', { signal: sig });
  await engine.close();
  return 0;
}
