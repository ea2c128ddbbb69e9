import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { Logger } from '../../../src/common/log.js';

describe('Logger levels', () => {
  it("children follow their parent's level, also when it changes later (a reload)", () => {
    const root = new Logger('info');
    const child = root.child('engine');
    const grandchild = child.child('images');
    assert.equal(grandchild.enabled('debug'), false);
    root.setLevel('debug');
    assert.equal(child.enabled('debug'), true);
    assert.equal(grandchild.enabled('debug'), true);
    root.setLevel('error');
    assert.equal(grandchild.enabled('warn'), false);
    // a level set on a child is its own (and its children's)
    child.setLevel('warn');
    assert.equal(grandchild.level, 'warn');
    assert.equal(root.level, 'error');
  });
});

describe('Logger output', () => {
  it('drops its lines once stderr is closed, instead of failing on every write (EPIPE)', async () => {
    // a process whose stderr reader went away: it logs on, and ends by itself with code 0
    const script = [
      "const { Logger } = await import('./src/common/log.ts');",
      "const log = new Logger('info');",
      "process.on('uncaughtException', (err) => { log.error('uncaught', { error: String(err) }); process.exitCode = 3; });",
      'await new Promise((r) => setTimeout(r, 300));',
      "for (let i = 0; i < 200; i++) { log.info('line', { i }); await new Promise((r) => setImmediate(r)); }",
      "process.stdout.write('done\\n');",
    ].join('\n');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: resolve(import.meta.dirname, '../../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr.destroy();
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    clearTimeout(timer);
    assert.equal(code, 0);
    assert.equal(out, 'done\n');
  });
});
