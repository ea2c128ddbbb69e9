import { join } from 'node:path';
import { parseLogLevel, rootLogger } from '../common/log.js';
import { defaultEngineConfig, type EngineConfig } from '../engine/config.js';
import { startEngine } from '../engine/daemon.js';
import { seedBusybox } from '../engine/images/seed.js';
import { startRegistry } from '../registry/index.js';
import { bool, type FlagSpec, parseArgs, str, untilSignal, usage } from './args.js';

const spec: Record<string, FlagSpec> = {
  'data-root': { kind: 'string', help: 'root of persistent state for both (default /var/lib/berth)' },
  'exec-root': { kind: 'string', help: 'engine runtime state (default /run/berth)' },
  host: { kind: 'string', help: 'engine listen address (default unix:///run/berth/berth.sock)' },
  'registry-addr': { kind: 'string', help: 'registry listen address (default 127.0.0.1:5000)' },
  'no-registry': { kind: 'bool', help: 'run only the engine' },
  'log-level': { kind: 'string', help: 'debug, info, warn or error (default info)' },
  help: { kind: 'bool', help: 'print this help' },
};

/**
 * `berth up`: the registry and the engine with defaults. The engine trusts the local registry over
 * plain HTTP. When it has no images (a fresh data root) it seeds busybox:latest from the host's
 * busybox-static.
 */
export async function runUpCommand(argv: string[]): Promise<number> {
  const p = parseArgs(argv, spec);
  if (bool(p, 'help')) {
    process.stdout.write(`${usage('up', spec)}\n`);
    return 0;
  }
  const level = str(p, 'log-level');
  if (level) rootLogger.setLevel(parseLogLevel(level));
  const dataRoot = str(p, 'data-root') ?? defaultEngineConfig.dataRoot;
  const registryAddr = str(p, 'registry-addr') ?? '127.0.0.1:5000';

  // The registry first, so that when the engine answers, both are up.
  const registry = bool(p, 'no-registry')
    ? undefined
    : await startRegistry({
        version: '0.1',
        storage: { filesystem: { rootdirectory: join(dataRoot, 'registry') }, delete: { enabled: true } },
        http: { addr: registryAddr },
      });

  const port = registryAddr.slice(registryAddr.lastIndexOf(':') + 1);
  const config: EngineConfig = {
    ...defaultEngineConfig,
    hosts: [str(p, 'host') ?? defaultEngineConfig.hosts[0] ?? 'unix:///run/berth/berth.sock'],
    dataRoot,
    execRoot: str(p, 'exec-root') ?? defaultEngineConfig.execRoot,
    logLevel: level ? parseLogLevel(level) : defaultEngineConfig.logLevel,
    insecureRegistries: [...defaultEngineConfig.insecureRegistries, registryAddr, `localhost:${port}`],
  };
  const engine = await startEngine(config, rootLogger.child('engine'), {
    // A fresh data root has no images: seed busybox before the API answers, so that the first
    // `docker run` works offline.
    beforeListen: async ({ images }) => {
      if ((await images.list()).length > 0) return;
      const id = await seedBusybox(images);
      rootLogger.info('seeded busybox:latest from the host busybox-static', { id });
    },
  });
  const sig = await untilSignal();
  rootLogger.info('shutting down', { signal: sig });
  await engine.close();
  await registry?.close();
  return 0;
}
