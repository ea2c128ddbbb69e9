import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { http, pushBlob, requireTool, run, sha256, tempDir, waitForHttp } from '../../helpers/registry.js';
import { BERTH_CLI, startNode, startRegistryCli } from '../../helpers/registry-process.js';
import { freePort } from '../../helpers/registry-reference.js';

let dir: string;
before(async () => {
  dir = await tempDir('berth-cli-');
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('berth registry (CLI)', () => {
  it('serves a YAML config, flags override it, writes an access log line, exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const root = join(dir, 'yaml-root');
    const config = join(dir, 'config.yml');
    await writeFile(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: warn',
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${join(dir, 'overridden')}`,
        '  delete:',
        '    enabled: true',
        'http:',
        '  addr: 127.0.0.1:1',
        '',
      ].join('\n'),
    );
    const p = startRegistryCli(['--config', config, '--addr', `127.0.0.1:${port}`, '--root', root]);
    try {
      await waitForHttp(`http://127.0.0.1:${port}/v2/`);
      const digest = await pushBlob(`http://127.0.0.1:${port}`, 'cli/repo', 'via the cli');
      const del = await http('DELETE', `http://127.0.0.1:${port}/v2/cli/repo/blobs/${digest}`);
      assert.equal(del.status, 202, 'storage.delete.enabled from the file');
      const data = await readFile(
        join(root, 'docker/registry/v2/blobs/sha256', digest.slice(7, 9), digest.slice(7), 'data'),
        'utf8',
      );
      assert.equal(data, 'via the cli');
    } finally {
      assert.equal(await p.stop(), 0, p.stderr());
    }
    assert.match(p.stdout(), /"DELETE \/v2\/cli\/repo\/blobs\/sha256:[0-9a-f]{64} HTTP\/1.1" 202 0/);
  });

  it('a JSON config works too; log.accesslog.disabled silences the access log', async () => {
    const port = await freePort();
    const config = join(dir, 'config.json');
    await writeFile(
      config,
      JSON.stringify({
        version: '0.1',
        log: { level: 'error', accesslog: { disabled: true } },
        storage: { filesystem: { rootdirectory: join(dir, 'json-root') } },
        http: { addr: `127.0.0.1:${port}` },
      }),
    );
    const p = startRegistryCli(['--config', config]);
    try {
      await waitForHttp(`http://127.0.0.1:${port}/v2/`);
      assert.equal((await http('GET', `http://127.0.0.1:${port}/v2/`)).status, 200);
    } finally {
      assert.equal(await p.stop('SIGINT'), 0);
    }
    assert.equal(p.stdout(), '');
  });

  it('a bad config or flag exits 2 with a message', async () => {
    const config = join(dir, 'bad.yml');
    await writeFile(config, 'storage:\n  s3:\n    bucket: x\n');
    const bad = startRegistryCli(['--config', config]);
    assert.equal(await bad.exit, 2);
    assert.match(bad.stderr(), /not supported/);
    const flag = startRegistryCli(['--nope']);
    assert.equal(await flag.exit, 2);
    assert.match(flag.stderr(), /unknown flag --nope/);
  });

  it('serves TLS with http.tls.certificate and key', async () => {
    requireTool('openssl', 'openssl is needed to make a test certificate');
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ]);
    const port = await freePort();
    const config = join(dir, 'tls.yml');
    await writeFile(
      config,
      `log:\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'tls-root')}\nhttp:\n  addr: 127.0.0.1:${port}\n  tls:\n    certificate: ${cert}\n    key: ${key}\n`,
    );
    const p = startRegistryCli(['--config', config]);
    try {
      const deadline = Date.now() + 10_000;
      let out = '';
      for (;;) {
        try {
          out = (await run('curl', ['-sS', '--cacert', cert, '-D-', `https://127.0.0.1:${port}/v2/`])).stdout;
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 150));
        }
      }
      assert.match(out, /^HTTP\/1.1 200/);
      assert.match(out, /docker-distribution-api-version: registry\/2.0/i);
      // Upload Locations are https URLs.
      const post = (
        await run('curl', [
          '-sS',
          '--cacert',
          cert,
          '-D-',
          '-X',
          'POST',
          `https://127.0.0.1:${port}/v2/tls/blobs/uploads/`,
        ])
      ).stdout;
      assert.match(post, new RegExp(`location: https://127.0.0.1:${port}/v2/tls/blobs/uploads/`, 'i'));
    } finally {
      await p.stop();
    }
  });

  it('a registry killed with SIGKILL loses no completed blob or manifest', async () => {
    const port = await freePort();
    const root = join(dir, 'kill-root');
    const base = `http://127.0.0.1:${port}`;
    let p = startRegistryCli(['--addr', `127.0.0.1:${port}`, '--root', root]);
    const digests: string[] = [];
    try {
      await waitForHttp(`${base}/v2/`);
      for (let i = 0; i < 5; i++) digests.push(await pushBlob(base, 'kill/me', `blob ${i}`));
    } finally {
      await p.stop('SIGKILL');
    }
    p = startRegistryCli(['--addr', `127.0.0.1:${port}`, '--root', root]);
    try {
      await waitForHttp(`${base}/v2/`);
      for (let i = 0; i < 5; i++) {
        const res = await http('GET', `${base}/v2/kill/me/blobs/${digests[i]}`);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('docker-content-digest'), sha256(`blob ${i}`));
      }
    } finally {
      await p.stop();
    }
  });

  it('serves from its bundle: a few modules of dist/registry-bundle, none of the module tree', async () => {
    // A resolve hook (Node's module.register) prints every module the process loads.
    const hooks = join(dir, 'trace-hooks.mjs');
    await writeFile(
      hooks,
      "export async function resolve(s, c, next) { const r = await next(s, c); if (r.url.startsWith('file:')) process.stderr.write(`loaded ${r.url}\\n`); return r; }\n",
    );
    const register = join(dir, 'trace-register.mjs');
    await writeFile(
      register,
      `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
    );
    const port = await freePort();
    const root = join(dir, 'bundle-root');
    const p = startNode([
      '--import',
      register,
      BERTH_CLI,
      'registry',
      '--addr',
      `127.0.0.1:${port}`,
      '--root',
      root,
    ]);
    try {
      await waitForHttp(`http://127.0.0.1:${port}/v2/`);
      const digest = await pushBlob(`http://127.0.0.1:${port}`, 'bundled/repo', 'from the bundle');
      assert.equal(digest, sha256('from the bundle'));
      const dist = pathToFileURL(join(BERTH_CLI, '../..')).href;
      const loaded = new Set(
        [...p.stderr().matchAll(/^loaded (\S+)$/gm)].map((m) => m[1]!.slice(dist.length)),
      );
      assert.ok(loaded.has('/registry-bundle/registry.command.js'), [...loaded].join('\n'));
      // Beside the bundle, only the CLI's entry and what it imports itself.
      const main = [
        '/cli/main.js',
        '/cli/args.js',
        '/cli/registry-bundle.js',
        '/common/errors.js',
        '/common/version.js',
      ];
      const tree = [...loaded].filter((u) => !u.startsWith('/registry-bundle/') && !main.includes(u));
      assert.deepEqual(tree, [], 'modules of the tree were loaded beside the bundle');
      // The module tree is ~60 modules; the bundle is one entry and its shared chunks.
      assert.ok(loaded.size < 25, `${loaded.size} modules: ${[...loaded].join(' ')}`);
    } finally {
      await p.stop();
    }
  });

  it('berth registry gc dispatches to the garbage collector', async () => {
    const p = startRegistryCli(['gc', '--help']);
    assert.equal(await p.exit, 0);
    assert.match(p.stdout(), /registry gc/);
  });
});
