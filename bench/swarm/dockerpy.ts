/**
 * The docker-py yardstick of issue 14 (outside CI, never a test): docker-py 5.0.3's seven swarm
 * suites against one berth engine, or against Debian's dockerd 20.10, each alone in a network
 * namespace (test/helpers/swarm-netns.ts) so that `swarm.init()` without an advertise address
 * finds one address.
 *
 *   node --import tsx bench/swarm/dockerpy.ts --tests <docker-py 5.0.3 checkout> [--system berth|dockerd]
 *        [-- <extra pytest arguments>]
 *
 * The test files are docker-py's own at tag 5.0.3 (`git archive 5.0.3 tests`), never copied into
 * this repository; the library is Debian's python3-docker (5.0.3) and pytest Debian's
 * python3-pytest, run as `/usr/bin/python3 -m pytest` with `DOCKER_TEST_API_VERSION=1.41`. The
 * busybox rootfs is imported as `alpine:3.10` (the suites' TEST_IMG) and `busybox:latest`. Prints
 * pytest's summary and the wall time; ends the engine by pid and removes the namespace.
 * `npm run build` first (berth runs from dist/).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../test/helpers/busybox.js';
import { NsEngine, TestNetwork } from '../../test/helpers/swarm-netns.js';
import { NsDockerd } from './ns-dockerd.js';

const SUITES = [
  'api_swarm_test',
  'api_service_test',
  'api_secret_test',
  'api_config_test',
  'models_nodes_test',
  'models_services_test',
  'models_swarm_test',
].map((s) => `tests/integration/${s}.py`);

interface Options {
  tests: string;
  system: 'berth' | 'dockerd';
  pytest: string[];
}

function parseOptions(argv: string[]): Options {
  const o: Options = { tests: '', system: 'berth', pytest: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      o.pytest = argv.slice(i + 1);
      break;
    }
    const v = argv[i + 1] ?? '';
    if (a === '--tests') o.tests = v;
    else if (a === '--system' && (v === 'berth' || v === 'dockerd')) o.system = v;
    else throw new Error(`unknown option ${a} ${v}`);
    i++;
  }
  if (!o.tests) throw new Error('--tests <docker-py 5.0.3 checkout> is required');
  return o;
}

/**
 * docker-py 5.0.3's conftest turns every warning into an error (`warnings.simplefilter('error')`).
 * On this machine's Python, docker-py itself warns (distutils' StrictVersion is deprecated) in
 * every client it makes, and the suites drop clients without closing them (a ResourceWarning
 * for the unclosed socket, which pytest 9 reports as PytestUnraisableExceptionWarning at the next
 * test): this plugin, loaded with `-p`, keeps those three warnings after that call, for berth and
 * dockerd alike. Nothing else of the suites changes.
 */
const WARNINGS_PLUGIN = `import warnings
import pytest
_simplefilter = warnings.simplefilter
def simplefilter(action, *args, **kwargs):
    _simplefilter(action, *args, **kwargs)
    if action == 'error':
        warnings.filterwarnings('ignore', category=DeprecationWarning)
        warnings.filterwarnings('ignore', category=ResourceWarning)
        warnings.filterwarnings('ignore', category=pytest.PytestUnraisableExceptionWarning)
warnings.simplefilter = simplefilter
`;

async function pytest(dir: string, socket: string, args: string[]): Promise<number> {
  const pluginDir = await mkdtemp(join(tmpdir(), 'berth-dockerpy-'));
  await writeFile(join(pluginDir, 'berth_dockerpy_warnings.py'), WARNINGS_PLUGIN);
  return new Promise<number>((resolve, reject) => {
    const child = spawn(
      '/usr/bin/python3',
      ['-m', 'pytest', '-p', 'no:cacheprovider', '-p', 'berth_dockerpy_warnings', ...args],
      {
        cwd: dir,
        stdio: 'inherit',
        env: {
          ...process.env,
          PYTHONPATH: pluginDir,
          DOCKER_HOST: `unix://${socket}`,
          DOCKER_TEST_API_VERSION: '1.41',
        },
      },
    );
    child.on('error', reject);
    child.on('exit', (code) => resolve(code ?? 1));
  }).finally(() => rm(pluginDir, { recursive: true, force: true }));
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  const net = await TestNetwork.create(1, '192.168.209');
  let engine: { socket: string; log(): string; destroy(): Promise<void> } | undefined;
  const cleanup = async () => {
    await engine?.destroy().catch(() => undefined);
    await net.destroy().catch(() => undefined);
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  process.once('SIGTERM', () => void cleanup().then(() => process.exit(143)));
  try {
    const host = net.hosts[0] ?? '';
    engine =
      opts.system === 'berth' ? await NsEngine.start(host, 'host1') : await NsDockerd.start(host, 'host1');
    const tar = await busyboxTarball();
    for (const ref of ['alpine:3.10', 'busybox:latest']) {
      const r = await runDocker(engine.socket, ['import', ...BUSYBOX_CHANGES, tar, ref]);
      if (r !== 0) throw new Error(`cannot import ${ref}`);
    }
    const start = Date.now();
    const code = await pytest(opts.tests, engine.socket, [...SUITES, ...opts.pytest]);
    const seconds = ((Date.now() - start) / 1000).toFixed(1);
    if (process.env.BERTH_DOCKERPY_LOG) await writeFile(process.env.BERTH_DOCKERPY_LOG, engine.log());
    console.log(`\n${opts.system}: pytest exited ${code} after ${seconds} s (load: ${await loadAverage()})`);
  } finally {
    await cleanup();
  }
}

function runDocker(socket: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn('docker', ['-H', `unix://${socket}`, ...args], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, DOCKER_CONFIG: join('/tmp', 'berth-dockerpy-cli') },
    });
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

async function loadAverage(): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  return (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
}

await main();
