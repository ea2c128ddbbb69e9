import { join } from 'node:path';
import { rootLogger } from '../common/log.js';
import type { EngineConfig } from '../engine/config.js';
import { startEngine } from '../engine/daemon.js';
import { seedBusybox } from '../engine/images/seed.js';
import { startRegistry } from '../registry/index.js';
import { bool, type FlagSpec, parseArgs, str, untilSignal, usage } from './args.js';
import { loadEngineConfig, onReloadSignal, reloadedConfig } from './engine.command.js';

const spec: Record<string, FlagSpec> = {
  'data-root': { kind: 'string', help: 'root of persistent state for both (default /var/lib/berth)' },
  'exec-root': { kind: 'string', help: 'engine runtime state (default /run/berth)' },
  host: { kind: 'string', help: 'engine listen address (default unix:///run/berth/berth.sock)' },
  'registry-addr': { kind: 'string', help: 'registry listen address (default 127.0.0.1:5000)' },
  'no-registry': { kind: 'bool', help: 'run only the engine' },
  'log-level': { kind: 'string', help: 'debug, info, warn or error (default info)' },
  'config-file': {
    kind: 'string',
    help: "the engine's configuration file, daemon.json form (default /etc/berth/daemon.json, read when present)",
  },
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
  // the engine's flags among up's, then the configuration file over them (conflicts refused)
  const engineFlagValues = new Map<string, string | boolean | string[]>();
  for (const name of ['data-root', 'exec-root', 'log-level', 'config-file']) {
    const v = str(p, name);
    if (v !== undefined) engineFlagValues.set(name, v);
  }
  const host = str(p, 'host');
  if (host !== undefined) engineFlagValues.set('host', [host]);
  const base = await loadEngineConfig({ flags: engineFlagValues, positional: [] });
  rootLogger.setLevel(base.logLevel);
  const dataRoot = base.dataRoot;
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
    ...base,
    insecureRegistries: [...base.insecureRegistries, registryAddr, `localhost:${port}`],
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
  const stopReloads = onReloadSignal(async () => {
    const parts = await reloadedConfig({ flags: engineFlagValues, positional: [] });
    if (parts.insecureRegistries) parts.insecureRegistries.push(registryAddr, `localhost:${port}`);
    if (parts.logLevel) rootLogger.setLevel(parts.logLevel);
    engine.reload(parts);
  });
  const sig = await untilSignal();
  stopReloads();
  rootLogger.info('shutting down', { signal: sig });
  await engine.close();
  await registry?.close();
  return 0;
}
