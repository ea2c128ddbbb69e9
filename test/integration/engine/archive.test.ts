import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { tarOf } from '../../helpers/tar-builder.js';

const exec = promisify(execFile);

interface PathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
}

/** docker cp: HEAD, GET and PUT /containers/{id}/archive against a real engine. */
describe('docker cp (archive)', () => {
  let engine: TestEngine;
  let out: string;
  const ok = (...args: string[]) => engine.dockerOk(args);
  const statOf = async (path: string) => {
    const r = await engine.request('HEAD', `/v1.41/containers/src/archive?path=${encodeURIComponent(path)}`);
    const header = r.headers['x-docker-container-path-stat'];
    return {
      status: r.status,
      stat: header ? (JSON.parse(Buffer.from(String(header), 'base64').toString()) as PathStat) : undefined,
    };
  };

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    out = await mkdtemp(join(tmpdir(), 'berth-cp-'));
    await ok(
      'run',
      '-d',
      '--name',
      'src',
      '-v',
      '/vol',
      'busybox',
      'sh',
      '-c',
      'mkdir -p /d/e; echo hi > /d/e/f; ln -s /d/e /lnk; ln -s / /escape; ln -s ../../../.. /up; echo v > /vol/x; sleep 1000',
    );
    for (
      let i = 0;
      i < 50 && (await engine.docker(['exec', 'src', 'test', '-f', '/vol/x'])).code !== 0;
      i++
    ) {
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  after(async () => {
    await engine?.destroy();
    if (out) await rm(out, { recursive: true, force: true });
  });

  it("stats paths as dockerd: Go's file modes, the link's target in the container, 404 and 400", async () => {
    const d = await statOf('/d');
    assert.equal(d.status, 200);
    assert.equal(d.stat?.name, 'd');
    assert.equal(d.stat?.mode, 2 ** 31 + 0o755);
    assert.match(d.stat?.mtime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    const f = await statOf('/d/e/f');
    assert.deepEqual([f.stat?.name, f.stat?.size, f.stat?.mode, f.stat?.linkTarget], ['f', 3, 0o644, '']);
    const link = await statOf('/lnk');
    assert.deepEqual(
      [link.stat?.name, link.stat?.mode, link.stat?.linkTarget],
      ['lnk', 2 ** 27 + 0o777, '/d/e'],
    );
    assert.equal((await statOf('/vol')).stat?.mode, 2 ** 31 + 0o755);
    assert.equal((await statOf('/nope')).status, 404);
    const missing = await engine.request('GET', '/v1.41/containers/src/archive?path=/nope');
    assert.deepEqual(missing.json(), { message: 'Could not find the file /nope in container src' });
    const empty = await engine.request('GET', '/v1.41/containers/src/archive');
    assert.equal(empty.status, 400);
    assert.equal((await engine.request('GET', '/v1.41/containers/nope/archive?path=/d')).status, 404);
  });

  it('copies directories, files through links, links themselves or followed (-L), and volume content', async () => {
    await ok('cp', 'src:/d', `${out}/`);
    assert.equal(await readFile(join(out, 'd', 'e', 'f'), 'utf8'), 'hi\n');
    await ok('cp', 'src:/lnk/f', join(out, 'through-link'));
    assert.equal(await readFile(join(out, 'through-link'), 'utf8'), 'hi\n');
    await ok('cp', 'src:/lnk', join(out, 'as-link'));
    assert.equal(await readlink(join(out, 'as-link')), '/d/e');
    await ok('cp', '-L', 'src:/lnk', join(out, 'followed'));
    assert.deepEqual(await readdir(join(out, 'followed')), ['f']);
    await ok('cp', 'src:/vol/x', join(out, 'from-volume'));
    assert.equal(await readFile(join(out, 'from-volume'), 'utf8'), 'v\n');
    const { stdout } = await exec('sh', ['-c', `docker -H ${engine.host} cp src:/vol - | tar -t`], {
      env: { ...process.env, DOCKER_CONFIG: engine.dockerConfig },
    });
    assert.deepEqual(stdout.trim().split('\n'), ['vol/', 'vol/x']);
  });

  it("keeps links inside the container: / and .. lead to the container's root, never the host's", async () => {
    await ok('cp', 'src:/escape/etc/passwd', join(out, 'passwd'));
    // busybox's passwd of the image, not the host's
    assert.equal(
      await readFile(join(out, 'passwd'), 'utf8'),
      await ok('exec', 'src', 'cat', '/etc/passwd').then((t) => `${t}\n`),
    );
    await ok('cp', 'src:/up/d/e/f', join(out, 'up-f'));
    assert.equal(await readFile(join(out, 'up-f'), 'utf8'), 'hi\n');
  });

  it('copies from a stopped container (mounted for the copy only) and announces archive-path', async () => {
    const since = Math.floor(Date.now() / 1000);
    await ok('stop', '-t', '1', 'src');
    await ok('cp', 'src:/d/e/f', join(out, 'from-stopped'));
    assert.equal(await readFile(join(out, 'from-stopped'), 'utf8'), 'hi\n');
    const id = await ok('inspect', '-f', '{{.Id}}', 'src');
    // the copy's mount goes once its tar has ended, which may be just after the client has it all
    await eventually(
      'no mount left behind',
      async () => !(await readFile('/proc/self/mountinfo', 'utf8')).includes(id),
    );
    const events = await engine.events(since, '{{.Actor.Attributes.name}}', ['event=archive-path']);
    // every copy announces one (the earlier tests' ones may fall in the same second)
    assert.ok(events.split('\n').length >= 1 && events.split('\n').every((n) => n === 'src'), events);
    assert.equal(await ok('start', 'src'), 'src');
  });

  it("a created container has dockerd's init files; once started, its /etc files are the engine's", async () => {
    await ok('create', '--name', 'fresh', '--hostname', 'freshhost', 'busybox', 'true');
    const { status, stat } = await (async () => {
      const r = await engine.request('HEAD', '/v1.41/containers/fresh/archive?path=/etc/resolv.conf');
      const h = r.headers['x-docker-container-path-stat'];
      return { status: r.status, stat: JSON.parse(Buffer.from(String(h), 'base64').toString()) as PathStat };
    })();
    assert.equal(status, 200);
    assert.equal(stat.size, 0);
    assert.equal(stat.mode, 0o755);
    for (const path of ['/etc/hosts', '/etc/hostname', '/.dockerenv', '/dev/console']) {
      const r = await engine.request('GET', `/v1.41/containers/fresh/archive?path=${path}`);
      assert.equal(r.status, 200, path);
    }
    const mtab = await engine.request('HEAD', '/v1.41/containers/fresh/archive?path=/etc/mtab');
    const mtabStat = JSON.parse(
      Buffer.from(String(mtab.headers['x-docker-container-path-stat']), 'base64').toString(),
    );
    assert.equal(mtabStat.linkTarget, '/proc/mounts');
    await ok('start', '-a', 'fresh');
    await ok('cp', 'fresh:/etc/hostname', join(out, 'hostname'));
    assert.equal(await readFile(join(out, 'hostname'), 'utf8'), 'freshhost\n');
    await ok('cp', 'fresh:/etc/hosts', join(out, 'hosts'));
    assert.match(await readFile(join(out, 'hosts'), 'utf8'), /127\.0\.0\.1\tlocalhost/);
    // the init layer is not a change of the container
    assert.equal(await ok('diff', 'fresh'), '');
    const inspect = (await engine.request('GET', '/v1.41/containers/fresh/json')).json<{
      GraphDriver: { Data: { LowerDir: string } };
      SizeRw?: number;
    }>();
    assert.match(inspect.GraphDriver.Data.LowerDir.split(':')[0] ?? '', /\/overlay\/init\/[0-9a-f]{32}$/);
    await ok('rm', 'fresh');
  });

  it('copies into a container: directories, links, volumes, through its links never out of it', async () => {
    const local = join(out, 'local');
    await exec('sh', [
      '-c',
      `mkdir -p ${local}/dir/sub && echo hello > ${local}/dir/sub/f && ln -s sub/f ${local}/dir/l && echo single > ${local}/one`,
    ]);
    await ok('exec', 'src', 'mkdir', '-p', '/target');
    await ok('cp', join(local, 'dir'), 'src:/target/');
    await ok('cp', join(local, 'one'), 'src:/vol/one');
    // /escape is a link to / in the container: the file lands in the container's /tmp
    await ok('cp', join(local, 'one'), 'src:/escape/tmp/');
    assert.equal(
      await ok('exec', 'src', 'sh', '-c', 'cat /target/dir/l /vol/one /tmp/one; readlink /target/dir/l'),
      'hello\nsingle\nsingle\nsub/f',
    );
    // and nothing on the host's /tmp
    assert.notEqual(await readFile('/tmp/one', 'utf8').catch(() => ''), 'single\n');
    const missing = await engine.docker(['cp', join(local, 'one'), 'src:/nonexist/x']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /Could not find the file \/nonexist in container src/);
    // a member that would climb out of the extraction point is refused
    const { stdout: evil } = await exec('sh', [
      '-c',
      `cd ${local} && tar -cf - --transform='s,^one,../../evil,' one | base64 -w0`,
    ]);
    const r = await engine.request('PUT', '/v1.41/containers/src/archive?path=/target', {
      body: Buffer.from(evil, 'base64'),
      headers: { 'Content-Type': 'application/x-tar' },
    });
    assert.equal(r.status, 400, r.text());
    assert.notEqual((await engine.docker(['exec', 'src', 'test', '-e', '/evil'])).code, 0);
    assert.equal(await ok('inspect', '-f', '{{.State.Status}}', 'src'), 'running');
    await ok('run', '-d', '--name', 'ro', '--read-only', 'busybox', 'sleep', '300');
    const ro = await engine.docker(['cp', join(local, 'one'), 'ro:/tmp/']);
    assert.match(ro.stderr, /container rootfs is marked read-only/);
    await ok('rm', '-f', 'ro');
  });

  it("tells errors in the container's paths, never the host's (docker cp and raw API)", async () => {
    const noHostPath = (text: string) => {
      assert.ok(!text.includes(engine.dir), `a host path in: ${text}`);
      assert.ok(!/\/overlay\/|\/merged\b/.test(text), `a host path in: ${text}`);
    };
    const long = `/${'a'.repeat(300)}`;
    const out1 = await engine.docker(['cp', `src:${long}`, join(out, 'long')]);
    assert.notEqual(out1.code, 0);
    noHostPath(out1.stderr);
    assert.match(out1.stderr, new RegExp(`lstat ${long}: file name too long`));
    const get = await engine.request('GET', `/v1.41/containers/src/archive?path=${long}/x`);
    assert.equal(get.status, 400);
    assert.deepEqual(get.json(), { message: `lstat ${long}: file name too long` });
    const into = await engine.docker(['cp', join(out, 'passwd'), `src:${long}/x`]);
    assert.notEqual(into.code, 0);
    noHostPath(into.stderr);
    // a trailing slash names a directory: a file there is an error (dockerd's lstat ENOTDIR)
    const slash = await engine.docker(['cp', 'src:/etc/passwd/', join(out, 'slash')]);
    assert.notEqual(slash.code, 0);
    noHostPath(slash.stderr);
    assert.match(slash.stderr, /lstat \/etc\/passwd\/: not a directory/);
    await assert.rejects(readFile(join(out, 'slash')));
    const before = await ok('exec', 'src', 'cat', '/etc/passwd');
    const onto = await engine.docker(['cp', join(out, 'passwd'), 'src:/etc/group/']);
    assert.notEqual(onto.code, 0);
    assert.equal(await ok('exec', 'src', 'cat', '/etc/passwd'), before);
    assert.match(await ok('exec', 'src', 'cat', '/etc/group'), /^root:x:0:/);
    // a hard link from the image's files into a volume: another file system
    const link = await engine.request('PUT', '/v1.41/containers/src/archive?path=/', {
      body: tarOf([{ name: 'vol/xdev', type: 'link', linkname: 'd/e/f' }]),
    });
    assert.equal(link.status, 400, link.text());
    assert.deepEqual(link.json(), { message: 'link /d/e/f /vol/xdev: invalid cross-device link' });
  });
});
