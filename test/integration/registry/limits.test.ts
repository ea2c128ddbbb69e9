import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startRegistry } from '../../../src/registry/index.js';
import { errorCodes, http } from '../../helpers/registry.js';

type Running = Awaited<ReturnType<typeof startRegistry>>;

describe('rate limiting', () => {
  let dir: string;
  let reg: Running;
  let byUser: Running;
  const basic = (u: string, p: string) => ({
    Authorization: `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`,
  });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-limits-it-'));
    const users = join(dir, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '4', users, 'alice', 'pw'], { stdio: 'ignore' });
    execFileSync('htpasswd', ['-bB', '-C', '4', users, 'bob', 'pw'], { stdio: 'ignore' });
    const common = {
      log: { level: 'error', accesslog: { disabled: true } },
      http: { addr: '127.0.0.1:0' },
    };
    reg = await startRegistry({
      ...common,
      storage: { filesystem: { rootdirectory: join(dir, 'a') } },
      berth: { ratelimit: { requestspersecond: 5, burst: 10 } },
    });
    byUser = await startRegistry({
      ...common,
      storage: { filesystem: { rootdirectory: join(dir, 'b') } },
      auth: { htpasswd: { realm: 'r', path: users } },
      berth: { ratelimit: { requestspersecond: 2, burst: 5, by: 'user' } },
    });
  });
  after(async () => {
    await reg.close();
    await byUser.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 429 TOOMANYREQUESTS with Retry-After beyond the burst, and recovers', async () => {
    const answers = [];
    const started = Date.now();
    for (let i = 0; i < 20; i++) answers.push(await http('GET', `${reg.url}/v2/`));
    // the bucket refills at 5 per second while the requests go: what passes is the burst plus
    // what refilled meanwhile (however slow a loaded machine makes them), never more
    const refilled = Math.ceil(((Date.now() - started) / 1000) * 5);
    const ok = answers.filter((r) => r.status === 200).length;
    const limited = answers.filter((r) => r.status === 429);
    assert.ok(
      ok >= 10 && ok <= 10 + refilled,
      `expected the burst (10) + ${refilled} refilled to pass, got ${ok}`,
    );
    assert.ok(limited.length > 0 || refilled >= 10, 'nothing was limited');
    assert.equal(limited.length, 20 - ok);
    const first = limited[0]!;
    assert.deepEqual(errorCodes(first), ['TOOMANYREQUESTS']);
    const retry = Number(first.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 2, `Retry-After ${retry}`);
    await new Promise((r) => setTimeout(r, retry * 1000));
    assert.equal((await http('GET', `${reg.url}/v2/`)).status, 200);
  });

  it('with by: user, authenticated users have their own buckets', async () => {
    const started = Date.now();
    // Verify alice once (the rate limiter only trusts credentials verified before).
    assert.equal((await http('GET', `${byUser.url}/v2/`, { headers: basic('alice', 'pw') })).status, 200);
    assert.equal((await http('GET', `${byUser.url}/v2/`, { headers: basic('bob', 'pw') })).status, 200);
    let aliceLimited = 0;
    for (let i = 0; i < 10; i++) {
      if ((await http('GET', `${byUser.url}/v2/`, { headers: basic('alice', 'pw') })).status === 429)
        aliceLimited++;
    }
    // 11 requests against a burst of 5 refilled at 2 per second (however long they took)
    const refilled = Math.ceil(((Date.now() - started) / 1000) * 2);
    assert.ok(aliceLimited >= 6 - refilled, `alice should be limited, ${aliceLimited} refusals`);
    assert.ok(aliceLimited > 0 || refilled >= 6, 'alice was never limited');
    // bob comes from the same address but has his own bucket.
    assert.equal((await http('GET', `${byUser.url}/v2/`, { headers: basic('bob', 'pw') })).status, 200);
  });
});
