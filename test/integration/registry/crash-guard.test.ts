/**
 * No request ends the registry process: an oversized chunked manifest PUT (with and without
 * htpasswd auth) and handlers that throw from everywhere a request's code can run. The registry
 * runs as a child process (as in production), so an uncaught exception would end it.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  errorCodes,
  http,
  OCI_MANIFEST,
  rawHttp,
  requireTool,
  startTestRegistry,
  type TestRegistry,
  tempDir,
} from '../../helpers/registry.js';
import {
  type RegistryProcess,
  startNodeProcess,
  startRegistryOnRoot,
} from '../../helpers/registry-process.js';
import { freePort } from '../../helpers/registry-reference.js';

const FAULTY = join(import.meta.dirname, '../../helpers/registry-faulty.ts');

interface Outcome {
  status?: number;
  body?: string;
  error?: string;
}

/**
 * PUT `size` bytes with Transfer-Encoding: chunked (no Content-Length), in 64 KiB chunks with
 * back-pressure. Resolves with the status when an answer came (also an early one), else the error.
 */
function chunkedPut(url: string, size: number, headers: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = request(url, {
      method: 'PUT',
      headers: { 'Content-Type': OCI_MANIFEST, 'Transfer-Encoding': 'chunked', ...headers },
    });
    let settled = false;
    const done = (o: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(o);
    };
    const timer = setTimeout(() => {
      req.destroy();
      done({ error: 'timeout' });
    }, 15_000);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => done({ status: res.statusCode, body }));
      res.on('error', () => done({ status: res.statusCode, body }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
    const chunk = Buffer.alloc(64 * 1024, 0x7b);
    let sent = 0;
    const pump = () => {
      while (sent < size && !req.destroyed) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });
}

async function assertServing(proc: RegistryProcess, url: string, headers: Record<string, string> = {}) {
  assert.ok(proc.alive(), `the registry exited:\n${proc.stderr()}`);
  const res = await http('GET', `${url}/v2/`, { headers });
  assert.equal(res.status, 200, res.text());
}

let dir: string;
before(async () => {
  dir = await tempDir('berth-guard-');
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('an oversized chunked manifest PUT', () => {
  it('is answered 413 SIZE_INVALID, 12 times in a row, and the registry keeps serving', async () => {
    const { proc, url } = await startRegistryOnRoot(join(dir, 'plain'));
    try {
      let refused = 0;
      for (let i = 0; i < 12; i++) {
        const out = await chunkedPut(`${url}/v2/big/manifest/manifests/t${i}`, 5 * 1024 * 1024);
        if (out.status !== undefined) {
          assert.equal(out.status, 413, out.body);
          assert.deepEqual(JSON.parse(out.body ?? '').errors[0].code, 'SIZE_INVALID');
          refused++;
        }
        await assertServing(proc, url);
      }
      assert.equal(refused, 12, 'every PUT reads its 413');
      // The access log has a line for each of them.
      assert.equal(
        proc.stdout().match(/"PUT \/v2\/big\/manifest\/manifests\/t\d+ HTTP\/1.1" 413/g)?.length,
        12,
      );
    } finally {
      assert.equal(await proc.stop(), 0, proc.stderr());
    }
    assert.doesNotMatch(proc.stderr(), /TypeError|uncaught/i);
  });

  it('with htpasswd auth, a logged-in user gets 413 too and the registry keeps serving', async () => {
    requireTool('htpasswd', 'apt-get install apache2-utils');
    const users = join(dir, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'alice', 'pw'], { stdio: 'ignore' });
    const config = join(dir, 'auth.yml');
    await writeFile(config, `auth:\n  htpasswd:\n    realm: berth\n    path: ${users}\n`);
    const { proc, url } = await startRegistryOnRoot(join(dir, 'auth'), ['--config', config]);
    const login = { Authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` };
    try {
      await assertServing(proc, url, login);
      for (let i = 0; i < 8; i++) {
        const out = await chunkedPut(`${url}/v2/big/manifest/manifests/t${i}`, 5 * 1024 * 1024, login);
        assert.equal(out.status, 413, out.body ?? out.error);
        await assertServing(proc, url, login);
      }
      // An anonymous one gets its 401 and changes nothing either.
      const anon = await chunkedPut(`${url}/v2/big/manifest/manifests/anon`, 5 * 1024 * 1024);
      assert.equal(anon.status, 401, anon.body ?? anon.error);
      await assertServing(proc, url, login);
    } finally {
      assert.equal(await proc.stop(), 0, proc.stderr());
    }
    assert.doesNotMatch(proc.stderr(), /TypeError|uncaught/i);
  });
});

describe('the rest of a body the registry refused', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startTestRegistry({ berth: { limits: { manifestsize: 1000 } } });
  });
  after(async () => {
    await reg.stop();
  });

  it('is discarded, and the same connection serves the next request', async () => {
    const chunk = Buffer.alloc(4096, 0x7b);
    const body = Buffer.concat(
      Array.from({ length: 64 }, () => Buffer.concat([Buffer.from('1000\r\n'), chunk, Buffer.from('\r\n')])),
    );
    const host = new URL(reg.url).host;
    const out = await rawHttp(
      reg.url,
      Buffer.concat([
        Buffer.from(
          `PUT /v2/rest/repo/manifests/t HTTP/1.1\r\nHost: ${host}\r\nContent-Type: ${OCI_MANIFEST}\r\nTransfer-Encoding: chunked\r\n\r\n`,
        ),
        body,
        Buffer.from(`0\r\n\r\nGET /v2/ HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
      ]),
    );
    const statuses = [...out.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    assert.deepEqual(statuses, ['413', '200'], out.text);
  });

  it('is cut after a bounded time when it never ends', async () => {
    const { connect } = await import('node:net');
    const { port } = new URL(reg.url);
    const socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (d) => {
      answer += d;
    });
    socket.on('error', () => {});
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
    socket.write(
      `PUT /v2/rest/endless/manifests/t HTTP/1.1\r\nHost: x\r\nContent-Type: ${OCI_MANIFEST}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    const started = Date.now();
    const chunk = Buffer.concat([Buffer.from('400\r\n'), Buffer.alloc(1024, 0x7b), Buffer.from('\r\n')]);
    const feeder = setInterval(() => {
      if (!socket.destroyed) socket.write(chunk);
    }, 5);
    const limit = setTimeout(() => socket.destroy(), 10_000);
    const end = await closed;
    clearInterval(feeder);
    clearTimeout(limit);
    assert.match(answer, /^HTTP\/1\.1 413/);
    assert.ok(end - started < 8_000, `the server kept the endless body for ${end - started} ms`);
  });
});

describe('an exception anywhere in request handling', () => {
  let proc: RegistryProcess;
  let url: string;
  before(async () => {
    const port = await freePort();
    proc = startNodeProcess(FAULTY, [
      JSON.stringify({
        log: { level: 'error' },
        http: { addr: `127.0.0.1:${port}` },
        storage: { filesystem: { rootdirectory: join(dir, 'faulty') } },
      }),
    ]);
    url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 20_000;
    while (!proc.stdout().includes('listening')) {
      if (!proc.alive() || Date.now() > deadline) throw new Error(`did not start: ${proc.stderr()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  after(async () => {
    await proc.stop();
  });

  for (const fault of ['sync', 'timer', 'emitter', 'rejection']) {
    it(`${fault}: is answered 500 UNKNOWN and the registry keeps serving`, async () => {
      for (let i = 0; i < 3; i++) {
        const res = await http('GET', `${url}/fault/${fault}`);
        assert.equal(res.status, 500, res.text());
        assert.deepEqual(errorCodes(res), ['UNKNOWN']);
        await assertServing(proc, url);
      }
    });
  }

  for (const fault of ['after-answer', 'close', 'log']) {
    it(`${fault}: the answer already given stands and the registry keeps serving`, async () => {
      for (let i = 0; i < 3; i++) {
        const res = await http('GET', `${url}/fault/${fault}`);
        assert.equal(res.status, 200);
        assert.equal(res.text(), 'ok');
        await new Promise((r) => setTimeout(r, 20));
        await assertServing(proc, url);
      }
    });
  }

  it('destroy: a request whose socket is gone ends alone', async () => {
    for (let i = 0; i < 3; i++) {
      await assert.rejects(http('GET', `${url}/fault/destroy`));
      await new Promise((r) => setTimeout(r, 20));
      await assertServing(proc, url);
    }
  });

  it('every fault is logged with its request', () => {
    for (const fault of ['timer', 'emitter', 'rejection', 'after-answer', 'close', 'log', 'destroy']) {
      assert.match(proc.stderr(), new RegExp(`/fault/${fault}`), `no log of ${fault}:\n${proc.stderr()}`);
    }
  });
});
