import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from '../../../src/registry/config.js';
import { parseYamlApart, parseYamlHere } from '../../../src/registry/yaml.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

const CONFIG = `version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: /srv/registry # a comment
  delete:
    enabled: true
http:
  addr: :5001
  headers:
    X-Content-Type-Options: [nosniff]
notifications:
  endpoints:
    - name: one
      url: http://127.0.0.1:9/events
      timeout: 500ms
      threshold: 5
`;

describe('YAML of the configuration', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-yaml-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('parsed in a child process: the same values and errors as in this process', () => {
    const texts = [
      CONFIG,
      '',
      'true',
      ':5000',
      '0x10',
      '~',
      '{"a": [1, 2, {"b": null}]}',
      'a: [unclosed',
      'k: 1\nk: 2',
    ];
    const apart = parseYamlApart(texts);
    assert.deepEqual(apart, parseYamlHere(texts));
    assert.deepEqual(apart.slice(1, 6), [
      { value: null },
      { value: true },
      { value: ':5000' },
      { value: 16 },
      { value: null },
    ]);
    assert.ok(
      'error' in apart[7]! && /flow sequence|unclosed|Missing/i.test(apart[7].error),
      JSON.stringify(apart[7]),
    );
    assert.ok('error' in apart[8]! && /unique/i.test(apart[8].error), JSON.stringify(apart[8]));
  });

  it('loadConfig reads YAML and REGISTRY_* values, and a bad file is a ConfigError naming it', async () => {
    const path = join(dir, 'config.yml');
    await writeFile(path, CONFIG);
    const c = await loadConfig(path, {
      REGISTRY_STORAGE_DELETE_ENABLED: 'false',
      REGISTRY_HTTP_ADDR: '127.0.0.1:5002',
    });
    assert.equal(c.storage.filesystem.rootdirectory, '/srv/registry');
    assert.equal(c.storage.delete.enabled, false);
    assert.equal(c.http.addr, '127.0.0.1:5002');
    assert.equal(c.notifications.endpoints[0]?.threshold, 5);
    const bad = join(dir, 'bad.yml');
    await writeFile(bad, 'storage: [unclosed\n');
    await assert.rejects(
      loadConfig(bad),
      (err: Error) => err instanceof ConfigError && err.message.startsWith(bad),
    );
  });

  it('a process that loads its configuration from a YAML file does not load the yaml package', async () => {
    const path = join(dir, 'serve.yml');
    await writeFile(path, CONFIG);
    const code = `
      import { createRequire } from 'node:module';
      import { loadConfig } from './src/registry/config.ts';
      const c = await loadConfig(${JSON.stringify(path)}, { REGISTRY_HTTP_ADDR: ':5003' });
      const cache = createRequire(import.meta.url).cache;
      const loaded = Object.keys(cache).some((k) => k.includes('/node_modules/yaml/'));
      process.stdout.write(JSON.stringify({ loaded, addr: c.http.addr }));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), { loaded: false, addr: ':5003' });
  });
});
