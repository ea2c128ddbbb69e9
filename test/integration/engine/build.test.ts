import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { utimesSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { POOL_SIZE } from '../../../src/engine/network/sandbox-pool.js';
import { startRegistry } from '../../../src/registry/index.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/**
 * `docker build` (the CLI's classic request: no BuildKit) against berth: the classic builder's
 * output, stages and targets, build args, ONBUILD, the cache (hits, a changed file, restarts,
 * prune, df), RUN's modern features (heredocs, cache mounts), failures, and a cancelled build
 * leaving nothing behind. Few builds, each covering several things.
 */

async function writeTree(dir: string, files: Record<string, string>): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), content);
  }
}

describe('docker build', { timeout: 600_000 }, () => {
  let engine: TestEngine;
  let work: string;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    work = await mkdtemp(join(tmpdir(), 'berth-build-'));
  });

  after(async () => {
    await engine?.destroy();
    if (work) await rm(work, { recursive: true, force: true });
  });

  const build = (args: string[], input?: string | Buffer) =>
    engine.docker(['build', ...args], { timeoutMs: 180_000, ...(input !== undefined ? { input } : {}) });

  it('runs stages a target needs, with build args, metadata, ONBUILD and the classic output', async () => {
    const ctx = join(work, 'stages');
    await writeTree(ctx, {
      Dockerfile: [
        'ARG BASE=busybox',
        'FROM $BASE AS base',
        'ARG GREETING=hello',
        'ENV WHO=world',
        'LABEL stage=base',
        'RUN echo "$GREETING $WHO" > /greeting && echo to-stderr >&2',
        'ONBUILD RUN echo triggered > /onbuild',
        'FROM busybox AS unused',
        'RUN exit 7',
        'FROM base AS final',
        'WORKDIR /app',
        'EXPOSE 8080',
        'CMD ["cat", "/greeting"]',
        '',
      ].join('\n'),
    });
    const r = await build([
      '-t',
      'stages:1',
      '-t',
      'stages:2',
      '--target',
      'final',
      '--build-arg',
      'GREETING=hi',
      '--build-arg',
      'UNUSED=1',
      '--label',
      'from=cli',
      ctx,
    ]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const out = r.stdout;
    // the unused stage is skipped: the meta ARG, 6 steps of base, 4 of final, the label
    assert.match(out, /Step 1\/12 : ARG BASE=busybox\n/);
    assert.match(out, /Step 2\/12 : FROM \$BASE AS base\n ---> [0-9a-f]{12}\n/);
    assert.doesNotMatch(out, /exit 7/);
    assert.match(
      out,
      /Step 6\/12 : RUN echo "\$GREETING \$WHO" > \/greeting && echo to-stderr >&2\n ---> Running in ([0-9a-f]{12})\n\x1b\[91mto-stderr\n\x1b\[0mRemoving intermediate container \1\n ---> [0-9a-f]{12}\n/,
    );
    assert.match(out, /Step 8\/12 : FROM base AS final\n# Executing 1 build trigger\n ---> Running in/);
    // the build's labels: a LABEL step at the end, as dockerd's classic builder
    assert.match(out, /Step 12\/12 : LABEL from=cli\n ---> Running in/);
    assert.match(out, /\[Warning\] One or more build-args \[UNUSED\] were not consumed\n/);
    assert.match(
      out,
      /Successfully built [0-9a-f]{12}\nSuccessfully tagged stages:1\nSuccessfully tagged stages:2\n/,
    );
    assert.equal(await engine.dockerOk(['run', '--rm', 'stages:1']), 'hi world');
    assert.equal(await engine.dockerOk(['run', '--rm', 'stages:1', 'cat', '/onbuild']), 'triggered');
    const config = JSON.parse(
      await engine.dockerOk(['image', 'inspect', '-f', '{{json .Config}}', 'stages:1']),
    );
    assert.equal(config.WorkingDir, '/app');
    assert.deepEqual(config.ExposedPorts, { '8080/tcp': {} });
    assert.deepEqual(config.Labels, { stage: 'base', from: 'cli' });
    assert.equal(config.OnBuild ?? null, null);
    const history = await engine.dockerOk([
      'history',
      '--no-trunc',
      '--format',
      '{{.CreatedBy}}',
      'stages:1',
    ]);
    assert.match(
      history,
      /^\/bin\/sh -c #\(nop\) {2}LABEL from=cli\n\/bin\/sh -c #\(nop\) {2}CMD \["cat" "\/greeting"\]\n\/bin\/sh -c #\(nop\) {2}EXPOSE 8080\n\/bin\/sh -c #\(nop\) WORKDIR \/app\n/,
    );
    assert.match(history, /\|1 GREETING=hi \/bin\/sh -c echo "\$GREETING \$WHO" > \/greeting/);
    assert.match(history, /\/bin\/sh -c #\(nop\) {2}ENV WHO=world/);
    // no intermediate container is left
    assert.equal(await engine.dockerOk(['ps', '-aq']), '');
    // --iidfile comes from the aux message; -q prints the ID alone
    const iid = join(work, 'iid');
    const again = await build([
      '-q',
      '--iidfile',
      iid,
      '--target',
      'final',
      '--build-arg',
      'GREETING=hi',
      '--label',
      'from=cli',
      ctx,
    ]);
    assert.equal(again.code, 0, again.stderr);
    const id = (await readFile(iid, 'utf8')).trim();
    assert.equal(again.stdout.trim(), id);
    assert.equal(await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'stages:1']), id);
  });

  it('runs independent stages at once, their output in stage order', async () => {
    const ctx = join(work, 'concurrent');
    // each stage waits (bounded: 30 s, for a loaded machine) for the other to have started: only
    // concurrent stages pass. One cache id for both (taken once: an id read from the clock per
    // stage differed when the millisecond turned between the two, and each stage waited alone)
    const rendezvous = `rendezvous-${Date.now()}`;
    const meet = (me: string, other: string) =>
      `RUN --mount=type=cache,id=${rendezvous},target=/r touch /r/${me} && ` +
      `for i in $(seq 300); do [ -e /r/${other} ] && break; sleep 0.1; done && test -e /r/${other} && echo ${me} > /ok`;
    await writeTree(ctx, {
      Dockerfile: [
        'FROM busybox AS a',
        meet('a', 'b'),
        'FROM busybox AS b',
        meet('b', 'a'),
        'FROM busybox',
        'COPY --from=a /ok /a',
        'COPY --from=b /ok /b',
        '',
      ].join('\n'),
    });
    // --force-rm: a failure here leaves no container for the tests after it to count
    const r = await build(['--force-rm', '-t', 'concurrent', ctx]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const steps = [...r.stdout.matchAll(/Step (\d+)\/7 :/g)].map((m) => Number(m[1]));
    assert.deepEqual(steps, [1, 2, 3, 4, 5, 6, 7]);
    assert.equal(await engine.dockerOk(['run', '--rm', 'concurrent', 'cat', '/a', '/b']), 'a\nb');
  });

  it('reuses steps from the cache until a copied file changes, across a restart, and prunes it', async () => {
    const ctx = join(work, 'cache');
    await writeTree(ctx, {
      Dockerfile: [
        'FROM busybox',
        'RUN echo one > /one',
        'COPY data.txt /data/',
        'RUN cat /data/data.txt > /copy',
        '',
      ].join('\n'),
      'data.txt': 'first\n',
      '.dockerignore': 'ignored.txt\n',
      'ignored.txt': 'not sent\n',
    });
    const first = await build(['-t', 'cached', ctx]);
    assert.equal(first.code, 0, first.stderr + first.stdout);
    assert.doesNotMatch(first.stdout, /Using cache/);
    const second = await build(['-t', 'cached', ctx]);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout.match(/ ---> Using cache\n/g)?.length, 3);
    // .dockerignore'd files change nothing
    await writeFile(join(ctx, 'ignored.txt'), 'changed\n');
    const ignored = await build(['-t', 'cached', ctx]);
    assert.equal(ignored.stdout.match(/ ---> Using cache\n/g)?.length, 3);
    // a changed file: the RUN before it is cached, its COPY and what follows are not
    await writeFile(join(ctx, 'data.txt'), 'second\n');
    const changed = await build(['-t', 'cached', ctx]);
    assert.equal(changed.code, 0, changed.stderr);
    assert.match(changed.stdout, /Step 2\/4 : RUN echo one > \/one\n ---> Using cache\n/);
    assert.match(changed.stdout, /Step 3\/4 : COPY data.txt \/data\/\n ---> [0-9a-f]{12}\n/);
    assert.equal(await engine.dockerOk(['run', '--rm', 'cached', 'cat', '/copy']), 'second');
    const history = await engine.dockerOk(['history', '--no-trunc', '--format', '{{.CreatedBy}}', 'cached']);
    assert.match(history, /\/bin\/sh -c #\(nop\) COPY file:[0-9a-f]{64} in \/data\/ \n/);

    // the cache is on disk: a restarted engine uses it
    await engine.restart();
    const restarted = await build(['-t', 'cached', ctx]);
    assert.equal(restarted.stdout.match(/ ---> Using cache\n/g)?.length, 3, restarted.stdout);

    // docker system df counts it; docker builder prune empties it
    const df = await engine.dockerOk(['system', 'df', '--format', '{{.Type}} {{.TotalCount}}']);
    const cacheCount = Number(/Build Cache (\d+)/.exec(df)?.[1]);
    assert.ok(cacheCount >= 3, df);
    const pruned = await engine.dockerOk(['builder', 'prune', '-af']);
    assert.match(pruned, /Total reclaimed space:/);
    const empty = await engine.dockerOk(['system', 'df', '--format', '{{.Type}} {{.TotalCount}}']);
    assert.match(empty, /Build Cache 0/);
    // --cache-from: the image's chain serves as the cache again
    const from = await build(['--cache-from', 'cached', '-t', 'cached', ctx]);
    assert.equal(from.stdout.match(/ ---> Using cache\n/g)?.length, 3, from.stdout);
    await engine.dockerOk(['builder', 'prune', '-af']);
    const cold = await build(['-t', 'cached', ctx]);
    assert.doesNotMatch(cold.stdout, /Using cache/);
    // --no-cache runs every step
    const nocache = await build(['--no-cache', '-t', 'cached', ctx]);
    assert.doesNotMatch(nocache.stdout, /Using cache/);
  });

  it('compares a large file with the one an earlier build kept, byte by byte: same size and time, other bytes, no cache', async () => {
    const ctx = join(work, 'large');
    await writeTree(ctx, { Dockerfile: 'FROM busybox\nCOPY big.bin /big.bin\nRUN md5sum /big.bin > /sum\n' });
    const big = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
    const file = join(ctx, 'big.bin');
    await writeFile(file, big);
    const when = new Date('2026-01-02T03:04:05Z');
    utimesSync(file, when, when);
    const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
    const sources = async () => {
      const df = await engine.request('GET', '/system/df');
      const items = (JSON.parse(df.body.toString()) as { BuildCache: Array<{ Type: string; Size: number }> })
        .BuildCache;
      return items.filter((i) => i.Type === 'source.local');
    };
    const first = await build(['-t', 'large', ctx]);
    assert.equal(first.code, 0, first.stderr + first.stdout);
    // the context's large file is kept once the build is done (after its answer)
    let kept: Array<{ Type: string; Size: number }> = [];
    for (let i = 0; i < 50 && kept.length === 0; i++) {
      kept = await sources();
      if (kept.length === 0) await sleep(100);
    }
    assert.deepEqual(
      kept.map((k) => k.Size),
      [big.length],
    );
    const same = await build(['-t', 'large', ctx]);
    assert.equal(same.stdout.match(/ ---> Using cache\n/g)?.length, 2, same.stdout);
    // one byte changed, the size and the time (whole seconds, all the CLI sends) put back
    big[big.length >> 1] = (big[big.length >> 1] as number) ^ 0xff;
    await writeFile(file, big);
    utimesSync(file, when, when);
    const changed = await build(['-t', 'large', ctx]);
    assert.equal(changed.code, 0, changed.stderr);
    assert.doesNotMatch(changed.stdout, /Using cache/);
    assert.equal(await engine.dockerOk(['run', '--rm', 'large', 'cat', '/sum']), `${md5(big)}  /big.bin`);
    // the next build is all from the cache, and both contents are kept
    const again = await build(['-t', 'large', ctx]);
    assert.equal(again.stdout.match(/ ---> Using cache\n/g)?.length, 2, again.stdout);
    for (let i = 0; i < 50 && kept.length < 2; i++) {
      kept = await sources();
      if (kept.length < 2) await sleep(100);
    }
    assert.equal(kept.length, 2);
    // docker builder prune lets the kept files go
    await engine.dockerOk(['builder', 'prune', '-af']);
    assert.deepEqual(await sources(), []);
  });

  it('runs heredocs and keeps a cache mount between builds', async () => {
    const ctx = join(work, 'modern');
    const dockerfile = (n: number) =>
      [
        'FROM busybox',
        'RUN <<EOF',
        'echo heredoc > /heredoc',
        'echo second line >> /heredoc',
        'EOF',
        'RUN <<EOF',
        '#!/bin/sh',
        'echo script > /script',
        'EOF',
        `RUN --mount=type=cache,target=/cache echo run${n} >> /cache/log && cat /cache/log > /seen`,
        'RUN --mount=type=tmpfs,target=/scratch touch /scratch/x && ! test -e /x',
        'RUN --network=none sh -c "! ip link show eth0"',
        'RUN grep -q "10.9.8.7[[:space:]]*buildhost" /etc/hosts',
        '',
      ].join('\n');
    await writeTree(ctx, { Dockerfile: dockerfile(1) });
    const one = await build(['-t', 'modern', '--add-host', 'buildhost:10.9.8.7', ctx]);
    assert.equal(one.code, 0, one.stderr + one.stdout);
    await writeTree(ctx, { Dockerfile: dockerfile(2) });
    const two = await build(['-t', 'modern', '--add-host', 'buildhost:10.9.8.7', ctx]);
    assert.equal(two.code, 0, two.stderr + two.stdout);
    assert.equal(await engine.dockerOk(['run', '--rm', 'modern', 'cat', '/heredoc']), 'heredoc\nsecond line');
    assert.equal(await engine.dockerOk(['run', '--rm', 'modern', 'cat', '/script']), 'script');
    assert.equal(await engine.dockerOk(['run', '--rm', 'modern', 'cat', '/seen']), 'run1\nrun2');
    const df = await engine.dockerOk(['system', 'df', '-v', '--format', '{{json .BuildCache}}']);
    assert.match(df, /exec\.cachemount/);
  });

  it('copies as COPY and ADD do, and binds the context or a stage into RUN', async () => {
    const ctx = join(work, 'copy');
    await writeTree(ctx, {
      'a.txt': 'a\n',
      'b.txt': 'b\n',
      'sub/deep/d.txt': 'd\n',
      Dockerfile: [
        'FROM busybox AS one',
        'RUN echo fromone > /one',
        'FROM busybox',
        'COPY --from=one /one /got/',
        'COPY --chown=1:2 --chmod=640 a.txt /owned',
        'COPY *.txt /multi/',
        'ADD arch.tar.gz /unpacked/',
        'COPY <<EOF /heredoc.txt',
        'hello',
        'EOF',
        'COPY --link b.txt /linked',
        'COPY --parents sub/deep/d.txt /par/',
        'WORKDIR /rel',
        'COPY a.txt rel.txt',
        'RUN --mount=type=bind,source=sub,target=/m cat /m/deep/d.txt > /fromctx',
        'RUN --mount=type=bind,from=one,source=/one,target=/o cat /o > /fromstage',
        '',
      ].join('\n'),
    });
    await new Promise<void>((resolve, reject) => {
      const p = spawn('tar', ['czf', join(ctx, 'arch.tar.gz'), '-C', ctx, 'a.txt']);
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`tar ${code}`))));
    });
    const r = await build(['-t', 'copies', ctx]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    // COPY runs no container: no Running in for it
    assert.match(r.stdout, /Step 4\/14 : COPY --from=one \/one \/got\/\n ---> [0-9a-f]{12}\n/);
    const listing = await engine.dockerOk([
      'run',
      '--rm',
      'copies',
      'sh',
      '-c',
      'stat -c "%n %u:%g %a" /owned; cat /got/one /multi/a.txt /multi/b.txt /unpacked/a.txt /heredoc.txt /linked /par/sub/deep/d.txt /rel/rel.txt /fromctx /fromstage',
    ]);
    assert.equal(listing, '/owned 1:2 640\nfromone\na\nb\na\nhello\nb\nd\na\nd\nfromone');

    // FROM scratch: a copy and metadata steps make an image of one layer; no helper image is left
    const before = (await engine.dockerOk(['images', '-aq'])).split('\n').length;
    await writeTree(ctx, { Dockerfile: 'FROM scratch\nENV X=1\nCOPY a.txt /a\nCMD ["/a"]\n' });
    const scratch = await build(['-t', 'fromscratch', ctx]);
    assert.equal(scratch.code, 0, scratch.stderr + scratch.stdout);
    assert.equal(
      await engine.dockerOk([
        'image',
        'inspect',
        '-f',
        '{{len .RootFS.Layers}} {{.Config.Env}}',
        'fromscratch',
      ]),
      '1 [PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin X=1]',
    );
    assert.equal((await engine.dockerOk(['images', '-aq'])).split('\n').length, before + 3);
  });

  it('pulls a missing base image with the credentials of X-Registry-Config', async () => {
    const users = join(work, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
    const registry = await startRegistry({
      version: '0.1',
      log: { level: 'error', accesslog: { disabled: true } },
      storage: {
        filesystem: { rootdirectory: await mkdtemp(join(work, 'registry-')) },
        delete: { enabled: true },
      },
      http: { addr: '127.0.0.1:0' },
      auth: { htpasswd: { realm: 'berth-build', path: users } },
    });
    try {
      const host = new URL(registry.url).host;
      await engine.dockerOk(['login', host, '-u', 'alice', '-p', 'alice-pw']);
      await engine.dockerOk(['tag', 'busybox', `${host}/base:1`]);
      await engine.dockerOk(['push', `${host}/base:1`], { timeoutMs: 120_000 });
      await engine.dockerOk(['rmi', `${host}/base:1`]);
      // a restarted engine has no session with the registry left from the push
      await engine.dockerOk(['logout', host]);
      await engine.restart();
      const ctx = join(work, 'pull');
      await writeTree(ctx, { Dockerfile: `FROM ${host}/base:1\nRUN echo pulled > /p\n` });
      const refused = await build(['-t', 'pulled', ctx]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /unauthorized|no basic auth credentials|authentication required/i);
      // the CLI sends the credentials of its config as X-Registry-Config
      await engine.dockerOk(['login', host, '-u', 'alice', '-p', 'alice-pw']);
      const r = await build(['-t', 'pulled', ctx]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /Step 1\/2 : FROM 127\.0\.0\.1:\d+\/base:1\n.*1: Pulling from base/s);
      assert.equal(await engine.dockerOk(['run', '--rm', 'pulled', 'cat', '/p']), 'pulled');
    } finally {
      await registry.close();
    }
  });

  it('fails as dockerd does: a RUN with its exit code, bad syntax before any step', async () => {
    const ctx = join(work, 'fail');
    await writeTree(ctx, { Dockerfile: 'FROM busybox\nRUN echo before; exit 3\n' });
    const failed = await build([ctx]);
    assert.equal(failed.code, 3);
    assert.match(failed.stdout, /before\n/);
    assert.match(failed.stderr, /The command '\/bin\/sh -c echo before; exit 3' returned a non-zero code: 3/);
    // rm (the default) keeps the failed step's container, forcerm does not
    const left = await engine.dockerOk(['ps', '-aq']);
    assert.equal(left.split('\n').length, 1);
    await engine.dockerOk(['rm', left]);
    await build(['--force-rm', ctx]);
    assert.equal(await engine.dockerOk(['ps', '-aq']), '');
    // --rm=false keeps every step's container
    await writeTree(ctx, { Dockerfile: 'FROM busybox\nENV KEEP=1\nRUN true\n' });
    const kept = await build(['--rm=false', '--no-cache', ctx]);
    assert.equal(kept.code, 0, kept.stderr);
    assert.doesNotMatch(kept.stdout, /Removing intermediate container/);
    const keptIds = (await engine.dockerOk(['ps', '-aq'])).split('\n');
    assert.equal(keptIds.length, 2);
    await engine.dockerOk(['rm', ...keptIds]);

    await writeTree(ctx, { Dockerfile: 'FROM busybox\nRUN true\nNOPE here\n' });
    const bad = await build([ctx]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /dockerfile parse error line 3: unknown instruction: NOPE/i);
    assert.doesNotMatch(bad.stdout, /Step 1/);
  });

  it('builds from a compressed context on stdin and from a remote URL', async () => {
    const ctx = join(work, 'compressed');
    await writeTree(ctx, { Dockerfile: 'FROM busybox\nCOPY hello /hello\n', hello: 'from the tar\n' });
    const tgz = join(work, 'ctx.tar.gz');
    await new Promise<void>((resolve, reject) => {
      const p = spawn('tar', ['czf', tgz, '-C', ctx, '.']);
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`tar ${code}`))));
    });
    const r = await build(['-t', 'fromgz', '-'], await readFile(tgz));
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal(await engine.dockerOk(['run', '--rm', 'fromgz', 'cat', '/hello']), 'from the tar');

    // remote: a tarball and a plain Dockerfile from a loopback HTTP server
    const served = new Map<string, Buffer>([
      ['/ctx.tar.gz', await readFile(tgz)],
      ['/Dockerfile', Buffer.from('FROM busybox\nRUN echo remote > /remote\n')],
    ]);
    const server = createServer((req, res) => {
      const body = served.get(req.url ?? '');
      res.writeHead(body ? 200 : 404);
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const tarball = await build(['-t', 'remote-tar', `http://127.0.0.1:${port}/ctx.tar.gz`]);
      assert.equal(tarball.code, 0, tarball.stderr + tarball.stdout);
      assert.equal(await engine.dockerOk(['run', '--rm', 'remote-tar', 'cat', '/hello']), 'from the tar');
      const plain = await build(['-t', 'remote-file', `http://127.0.0.1:${port}/Dockerfile`]);
      assert.equal(plain.code, 0, plain.stderr + plain.stdout);
      assert.equal(await engine.dockerOk(['run', '--rm', 'remote-file', 'cat', '/remote']), 'remote');
    } finally {
      server.close();
    }
  });

  it('squashes the build into one layer on the base (experimental), refused otherwise', async () => {
    const ctx = join(work, 'squash');
    await writeTree(ctx, {
      Dockerfile: 'FROM busybox\nRUN echo one > /one && rm /bin/true\nRUN echo two > /two\nENV S=1\n',
    });
    const refused = await build(['--squash', ctx]);
    assert.notEqual(refused.code, 0);
    // the CLI refuses it itself against an engine without experimental (so would the engine)
    assert.match(refused.stderr, /only supported .*experimental/);
    const experimental = await TestEngine.start({ args: ['--experimental'], bridge: 'none' });
    try {
      await ensureBusybox(experimental);
      const r = await experimental.docker(['build', '--squash', '-t', 'squashed', ctx], {
        timeoutMs: 180_000,
      });
      assert.equal(r.code, 0, r.stderr + r.stdout);
      const layers = (ref: string) =>
        experimental.dockerOk(['image', 'inspect', '-f', '{{len .RootFS.Layers}}', ref]).then(Number);
      assert.equal(await layers('squashed'), (await layers('busybox')) + 1);
      const files = await experimental.dockerOk([
        'run',
        '--rm',
        '--network',
        'none',
        'squashed',
        'sh',
        '-c',
        'cat /one /two; echo $S; test -e /bin/true || echo gone',
      ]);
      assert.equal(files, 'one\ntwo\n1\ngone');
      const history = await experimental.dockerOk([
        'history',
        '--no-trunc',
        '--format',
        '{{.Comment}}',
        'squashed',
      ]);
      assert.match(history.split('\n')[0] ?? '', /^merge sha256:[0-9a-f]{64} to sha256:[0-9a-f]{64}$/);
    } finally {
      await experimental.destroy();
    }
  });

  it('a cancelled build leaves no container, mount or context behind', async () => {
    const ctx = join(work, 'cancel');
    await writeTree(ctx, {
      Dockerfile: 'FROM busybox\nRUN --mount=type=cache,target=/c echo begun-$((1+1)); sleep 60\n',
    });
    const cli = spawn('docker', ['-H', engine.host, 'build', '--no-cache', ctx], {
      env: { ...process.env, DOCKER_CONFIG: engine.dockerConfig, DOCKER_HOST: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let seen = '';
    cli.stdout.on('data', (d: Buffer) => {
      seen += d.toString();
    });
    for (let i = 0; i < 300 && !seen.includes('begun-2'); i++) await sleep(100);
    assert.match(seen, /begun-2/);
    assert.notEqual(await engine.dockerOk(['ps', '-q']), '');
    cli.kill('SIGKILL');
    let containers = 'x';
    for (let i = 0; i < 100 && containers !== ''; i++) {
      await sleep(200);
      containers = await engine.dockerOk(['ps', '-aq']);
    }
    assert.equal(containers, '');
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
      .split('\n')
      .filter((l) => l.includes(engine.dataRoot) || l.includes(engine.execRoot));
    // the network namespaces the engine keeps made ahead for the next starts are its own (the
    // bare one and the default bridge's pool)
    const spare = mounts.filter((l) => / - nsfs /.test(l) && l.includes(join(engine.execRoot, 'netns')));
    assert.ok(spare.length <= 1 + POOL_SIZE, spare.join('\n'));
    assert.deepEqual(
      mounts.filter((l) => !spare.includes(l)),
      [],
    );
    assert.deepEqual(await readdir(join(engine.dataRoot, 'build', 'work')), []);
  });
});
