/**
 * Send the bytes of saved requests (a failing request's file, as a run prints it) to a fresh
 * server with the fuzzer's fixtures, one connection each, and print what came back:
 *
 *   node --import tsx test/fuzz/replay.ts engine /tmp/berth-fuzz-engine-1/request-140.bin [...]
 *   node --import tsx test/fuzz/replay.ts registry /tmp/berth-fuzz-registry-7/request-12.bin
 */
import { readFile } from 'node:fs/promises';
import { TestEngine } from '../helpers/engine.js';
import { EngineWorld } from './engine/world.js';
import { exchange } from './lib/exchange.js';
import { showBytes } from './lib/verdict.js';
import { startRegistryProcess } from './registry/process.js';
import { RegistryWorld } from './registry/world.js';

const args = process.argv.slice(2);
const halfClose = args.includes('--half-close');
const [kind, ...files] = args.filter((a) => a !== '--half-close');
if ((kind !== 'engine' && kind !== 'registry') || files.length === 0) {
  process.stderr.write('usage: replay.ts engine|registry [--half-close] <request file>...\n');
  process.exit(2);
}

async function replay(connect: { path: string } | { host: string; port: number }): Promise<void> {
  for (const file of files) {
    const data = await readFile(file);
    const r = await exchange(
      connect,
      {
        data,
        methods: [data.toString('latin1').split(' ')[0] ?? 'GET'],
        halfClose,
        mayClose: false,
        streaming: false,
        mayBlock: false,
        label: file,
      },
      15_000,
    );
    process.stdout.write(
      `== ${file}\n${showBytes(r.received, 8000)}\nclosed=${r.closed} timedOut=${r.timedOut} error=${r.socketError ?? ''} unsent=${r.unsent} ${r.elapsedMs} ms\n`,
    );
  }
}

if (kind === 'engine') {
  const engine = await TestEngine.start();
  try {
    await new EngineWorld(engine).setup();
    await replay({ path: engine.socket });
    process.stdout.write(`--- engine log (end) ---\n${engine.log().slice(-4000)}\n`);
  } finally {
    await engine.destroy();
  }
} else {
  const registry = await startRegistryProcess();
  try {
    await new RegistryWorld(registry.url).setup();
    await replay({ host: '127.0.0.1', port: registry.port });
    process.stdout.write(`--- registry log (end) ---\n${registry.logTail()}\n`);
  } finally {
    await registry.stop();
  }
}
