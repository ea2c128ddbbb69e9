import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

const exec = promisify(execFile);

async function mounted(path: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info.split('\n').some((l) => l.split(' ')[4] === path);
}

/** Volumes through the docker CLI (28) against a real engine. */
describe('volumes: docker CLI', () => {
  let engine: TestEngine;
  let scratch: string;

  before(async () => {
    engine = await TestEngine.start();
    scratch = await mkdtemp(join(tmpdir(), 'berth-vol-'));
    await ensureBusybox(engine);
  });

  after(async () => {
    await engine?.destroy();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('creates, lists with filters, inspects and removes volumes', async () => {
    assert.equal(await engine.dockerOk(['volume', 'create', '--label', 'team=a', 'v-one']), 'v-one');
    await engine.dockerOk(['volume', 'create', 'v-two']);
    const ls = await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'name=v-']);
    assert.deepEqual(ls.split('\n').sort(), ['v-one', 'v-two']);
    assert.equal(await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'label=team=a']), 'v-one');
    assert.equal(await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'label=team=b']), '');
    const dangling = await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'dangling=true']);
    assert.ok(dangling.includes('v-one') && dangling.includes('v-two'));
    assert.ok((await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'driver=local'])).includes('v-two'));
    // the driver filter matches exactly (dockerd lists nothing for a part of the name)
    assert.equal(await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'driver=loc']), '');
    const [v] = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'v-one'])) as Array<
      Record<string, unknown>
    >;
    assert.equal(v?.Name, 'v-one');
    assert.equal(v?.Driver, 'local');
    assert.equal(v?.Scope, 'local');
    assert.deepEqual(v?.Labels, { team: 'a' });
    assert.equal(v?.Mountpoint, join(engine.dataRoot, 'volumes', 'v-one', '_data'));
    assert.match(String(v?.CreatedAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const st = await stat(join(engine.dataRoot, 'volumes', 'v-one', '_data'));
    assert.equal(st.mode & 0o777, 0o755);
    // Creating an existing name answers the existing volume; another driver is unknown (404).
    assert.equal(await engine.dockerOk(['volume', 'create', 'v-one']), 'v-one');
    const otherDriver = await engine.docker(['volume', 'create', '-d', 'foo', 'v-one']);
    assert.notEqual(otherDriver.code, 0);
    assert.match(
      otherDriver.stderr,
      /Error response from daemon: create v-one: error looking up volume plugin foo: plugin "foo" not found/,
    );
    const short = await engine.docker(['volume', 'create', 'a']);
    assert.match(
      short.stderr,
      /create a: volume name is too short, names should be at least two alphanumeric characters/,
    );
    const bad = await engine.docker(['volume', 'create', 'bad/name']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /includes invalid characters for a local volume name/);
    await engine.dockerOk(['volume', 'rm', 'v-one', 'v-two']);
    const gone = await engine.docker(['volume', 'inspect', 'v-one']);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /no such volume/i);
    assert.equal((await engine.docker(['volume', 'rm', '-f', 'v-one'])).code, 0);
  });

  it('shares a named volume between containers, read-only when asked', async () => {
    await engine.dockerOk([
      'run',
      '--name',
      'vw',
      '-v',
      'data:/data',
      'busybox',
      'sh',
      '-c',
      'echo x > /data/f',
    ]);
    assert.equal(
      await engine.dockerOk(['run', '--rm', '-v', 'data:/data', 'busybox', 'cat', '/data/f']),
      'x',
    );
    const ro = await engine.docker([
      'run',
      '--rm',
      '-v',
      'data:/data:ro',
      'busybox',
      'sh',
      '-c',
      'echo y > /data/f',
    ]);
    assert.notEqual(ro.code, 0);
    assert.match(ro.stderr, /Read-only file system/);
    const mounts = JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Mounts}}', 'vw']));
    assert.deepEqual(mounts, [
      {
        Type: 'volume',
        Name: 'data',
        Source: join(engine.dataRoot, 'volumes', 'data', '_data'),
        Destination: '/data',
        Driver: 'local',
        Mode: 'z',
        RW: true,
        Propagation: '',
      },
    ]);
    assert.match(
      await engine.dockerOk(['ps', '-a', '--filter', 'volume=data', '--format', '{{.Names}}']),
      /vw/,
    );
    assert.match(
      await engine.dockerOk(['ps', '-a', '--filter', 'volume=/data', '--format', '{{.Names}}']),
      /vw/,
    );
    assert.equal(
      await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'dangling=false', '--filter', 'name=data']),
      'data',
    );
    // In use by a (stopped) container: 409 and the volume stays.
    const busy = await engine.docker(['volume', 'rm', 'data']);
    assert.notEqual(busy.code, 0);
    assert.match(busy.stderr, /volume is in use/);
    const forced = await engine.docker(['volume', 'rm', '-f', 'data']);
    assert.notEqual(forced.code, 0);
    await engine.dockerOk(['rm', '-v', 'vw']);
    // A named volume survives rm -v.
    assert.equal(await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'name=^data$']), 'data');
    await engine.dockerOk(['volume', 'rm', 'data']);
  });

  it('makes anonymous volumes that rm -v removes, and auto-remove too', async () => {
    const id = await engine.dockerOk(['run', '-d', '-v', '/anon', 'busybox', 'sh', '-c', 'echo a > /anon/f']);
    await engine.dockerOk(['wait', id]);
    const [m] = JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Mounts}}', id])) as Array<
      Record<string, unknown>
    >;
    const name = String(m?.Name);
    assert.match(name, /^[0-9a-f]{64}$/);
    assert.equal(m?.Mode, '');
    const [v] = JSON.parse(await engine.dockerOk(['volume', 'inspect', name])) as Array<
      Record<string, unknown>
    >;
    assert.deepEqual(v?.Labels, { 'com.docker.volume.anonymous': '' });
    await engine.dockerOk(['rm', '-v', id]);
    assert.notEqual((await engine.docker(['volume', 'inspect', name])).code, 0);
    const before = new Set((await engine.dockerOk(['volume', 'ls', '-q'])).split('\n').filter(Boolean));
    await engine.dockerOk(['run', '--rm', '-v', '/anon2', 'busybox', 'true']);
    const afterList = (await engine.dockerOk(['volume', 'ls', '-q'])).split('\n').filter(Boolean);
    assert.deepEqual(
      afterList.filter((n) => !before.has(n)),
      [],
    );
  });

  it("copies an image's VOLUME content into a new volume unless nocopy", async () => {
    const root = join(scratch, 'volimg');
    await mkdir(root, { recursive: true });
    await exec('tar', ['-xf', await busyboxTarball(), '-C', root]);
    await mkdir(join(root, 'vol'), { recursive: true });
    await writeFile(join(root, 'vol', 'hello'), 'from-image\n');
    await exec('chown', ['-R', '1000:1001', join(root, 'vol')]);
    await exec('chmod', ['0640', join(root, 'vol', 'hello')]);
    const tarball = join(scratch, 'volimg.tar');
    await exec('tar', ['--numeric-owner', '-cf', tarball, '-C', root, '.']);
    await engine.dockerOk([
      'import',
      ...BUSYBOX_CHANGES,
      '--change',
      'VOLUME /vol',
      tarball,
      'volimg:latest',
    ]);
    const out = await engine.dockerOk([
      'run',
      '--rm',
      'volimg',
      'sh',
      '-c',
      'stat -c "%u:%g %a" /vol/hello /vol && cat /vol/hello',
    ]);
    assert.equal(out, '1000:1001 640\n1000:1001 755\nfrom-image');
    await engine.dockerOk(['run', '--rm', '-v', 'cu:/vol', 'volimg', 'true']);
    assert.equal(
      await engine.dockerOk(['run', '--rm', '-v', 'cu:/x', 'busybox', 'cat', '/x/hello']),
      'from-image',
    );
    const empty = await engine.dockerOk([
      'run',
      '--rm',
      '--mount',
      'type=volume,src=nc,dst=/vol,volume-nocopy',
      'volimg',
      'ls',
      '-A',
      '/vol',
    ]);
    assert.equal(empty, '');
    await engine.dockerOk(['volume', 'rm', 'cu', 'nc']);
  });

  it('mounts --mount volumes with labels and shares them with --volumes-from', async () => {
    const hostDir = join(scratch, 'bindsrc');
    await mkdir(hostDir, { recursive: true });
    await writeFile(join(hostDir, 'b'), 'bound\n');
    await engine.dockerOk([
      'create',
      '--name',
      'vsrc',
      '--mount',
      'type=volume,src=shared,dst=/shared,volume-label=k=v',
      '-v',
      `${hostDir}:/bind`,
      'busybox',
    ]);
    const [v] = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'shared'])) as Array<
      Record<string, unknown>
    >;
    assert.deepEqual(v?.Labels, { k: 'v' });
    await engine.dockerOk([
      'run',
      '--rm',
      '--volumes-from',
      'vsrc',
      'busybox',
      'sh',
      '-c',
      'echo s > /shared/s',
    ]);
    const both = await engine.dockerOk([
      'run',
      '--rm',
      '--volumes-from',
      'vsrc:ro',
      'busybox',
      'sh',
      '-c',
      'cat /shared/s /bind/b; touch /shared/t 2>/dev/null && echo writable || echo readonly',
    ]);
    assert.equal(both, 's\nbound\nreadonly');
    // a 400, as dockerd's (a 404 from create makes the CLI try to pull the image)
    const missing = await engine.request('POST', '/v1.41/containers/create', {
      body: { Image: 'busybox', HostConfig: { VolumesFrom: ['nosuch'] } },
    });
    assert.equal(missing.status, 400);
    assert.equal(missing.json<{ message: string }>().message, 'No such container: nosuch');
    await engine.dockerOk(['rm', 'vsrc']);
    await engine.dockerOk(['volume', 'rm', 'shared']);
  });

  it('mounts tmpfs and bind volumes from driver options only while in use', async () => {
    await engine.dockerOk([
      'volume',
      'create',
      '--opt',
      'type=tmpfs',
      '--opt',
      'device=tmpfs',
      '--opt',
      'o=size=2m',
      'tv',
    ]);
    const df = await engine.dockerOk([
      'run',
      '--rm',
      '-v',
      'tv:/t',
      'busybox',
      'sh',
      '-c',
      'grep " /t " /proc/mounts',
    ]);
    assert.match(df, /^tmpfs \/t tmpfs/);
    assert.equal(await mounted(join(engine.dataRoot, 'volumes', 'tv', '_data')), false);
    const hostDir = join(scratch, 'optbind');
    await mkdir(hostDir, { recursive: true });
    await writeFile(join(hostDir, 'h'), 'host\n');
    await engine.dockerOk([
      'volume',
      'create',
      '--opt',
      'type=none',
      '--opt',
      'o=bind',
      '--opt',
      `device=${hostDir}`,
      'bv',
    ]);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'bv:/b', 'busybox', 'cat', '/b/h']), 'host');
    assert.equal(await mounted(join(engine.dataRoot, 'volumes', 'bv', '_data')), false);
    await engine.dockerOk(['volume', 'rm', 'tv', 'bv']);
    // Removing the bind volume never touches the host directory.
    assert.equal(await readFile(join(hostDir, 'h'), 'utf8'), 'host\n');
    const badOpt = await engine.docker(['volume', 'create', '--opt', 'nope=1', 'x1']);
    assert.notEqual(badOpt.code, 0);
    assert.match(badOpt.stderr, /Error response from daemon: create x1: invalid option: "nope"/);
    assert.equal((await engine.docker(['volume', 'inspect', 'x1'])).code, 1);
  });

  it('prunes anonymous volumes by default and named ones with --all', async () => {
    await engine.dockerOk(['volume', 'create', 'p-named']);
    const id = await engine.dockerOk(['create', '-v', '/p', 'busybox']);
    const anon = String(
      (
        JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Mounts}}', id])) as Array<{
          Name: string;
        }>
      )[0]?.Name,
    );
    await engine.dockerOk(['rm', id]);
    const out = await engine.dockerOk(['volume', 'prune', '-f']);
    assert.match(out, new RegExp(anon));
    assert.doesNotMatch(out, /p-named/);
    const all = await engine.dockerOk(['volume', 'prune', '-f', '--all', '--filter', 'label!=keep']);
    assert.match(all, /p-named/);
  });

  it('publishes create, mount, unmount and destroy events', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['run', '--rm', '-v', 'ev:/e', 'busybox', 'true']);
    await engine.dockerOk(['volume', 'rm', 'ev']);
    const lines = await engine.events(since, '{{json .}}', ['type=volume', 'volume=ev']);
    const events = lines
      .split('\n')
      .map((l) => JSON.parse(l) as { Action: string; Actor: { Attributes: Record<string, string> } });
    assert.deepEqual(
      events.map((e) => e.Action),
      ['create', 'mount', 'unmount', 'destroy'],
    );
    const mount = events[1]?.Actor.Attributes ?? {};
    assert.deepEqual(Object.keys(mount).sort(), [
      'container',
      'destination',
      'driver',
      'propagation',
      'read/write',
    ]);
    assert.equal(mount.destination, '/e');
    assert.equal(mount['read/write'], 'true');

    // among the container's own events, in dockerd 20.10's order
    const all = (await engine.events(since, '{{json .}}')).split('\n').map(
      (l) =>
        JSON.parse(l) as {
          Type: string;
          Action: string;
          Actor: { ID: string; Attributes: Record<string, string> };
        },
    );
    const cid = mount.container;
    assert.ok(cid);
    assert.deepEqual(
      all
        .filter((e) => e.Actor.ID === cid || e.Actor.Attributes.container === cid)
        .map((e) => `${e.Type} ${e.Action}`),
      [
        'container create',
        'container attach',
        'network connect',
        'volume mount',
        'container start',
        'container die',
        'network disconnect',
        'volume unmount',
        'container destroy',
      ],
    );
  });

  it('keeps volumes, their data and their users across an engine restart and a kill -9', async () => {
    await engine.dockerOk([
      'run',
      '--name',
      'keeper',
      '-v',
      'kept:/k',
      'busybox',
      'sh',
      '-c',
      'echo kept > /k/f',
    ]);
    await engine.restart();
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'kept:/k', 'busybox', 'cat', '/k/f']), 'kept');
    assert.match((await engine.docker(['volume', 'rm', 'kept'])).stderr, /volume is in use/);
    await engine.dockerOk(['volume', 'create', '--label', 'a=b', 'after-kill']);
    await engine.kill9();
    await engine.launch();
    const [v] = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'after-kill'])) as Array<
      Record<string, unknown>
    >;
    assert.deepEqual(v?.Labels, { a: 'b' });
    await engine.dockerOk(['rm', 'keeper']);
    await engine.dockerOk(['volume', 'rm', 'kept', 'after-kill']);
  });

  it('keeps the device of a running container mounted across a restart, unmounts it at stop', async () => {
    await engine.dockerOk(['volume', 'create', '--opt', 'type=tmpfs', '--opt', 'device=tmpfs', 'live-tv']);
    const data = join(engine.dataRoot, 'volumes', 'live-tv', '_data');
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'live',
      '-v',
      'live-tv:/t',
      'busybox',
      'sh',
      '-c',
      'echo on > /t/f; sleep 60',
    ]);
    assert.equal(await mounted(data), true);
    await engine.restart();
    assert.equal(await mounted(data), true);
    let content = '';
    for (let i = 0; i < 50 && content === ''; i++) {
      content = await readFile(join(data, 'f'), 'utf8').catch(() => '');
      if (content === '') await sleep(100);
    }
    assert.equal(content, 'on\n');
    await engine.dockerOk(['rm', '-f', 'live']);
    assert.equal(await mounted(data), false);
    await engine.dockerOk(['volume', 'rm', 'live-tv']);
  });

  it('announces create for every create, and only prune when pruning', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['volume', 'create', 'ev2']);
    await engine.dockerOk(['volume', 'create', 'ev2']);
    const id = await engine.dockerOk(['create', '-v', 'ev2:/x', 'busybox', 'true']);
    const id2 = await engine.dockerOk(['create', '--mount', 'source=ev2,target=/y', 'busybox', 'true']);
    await engine.dockerOk(['rm', id, id2]);
    await engine.dockerOk(['volume', 'prune', '-f', '--all', '--filter', 'label!=nothing-has-this']);
    const lines = await engine.events(since, '{{json .}}', ['type=volume']);
    const events = lines
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { Action: string; Actor: { ID: string; Attributes: Record<string, string> } },
      )
      .filter((e) => e.Actor.ID === 'ev2' || e.Action === 'prune');
    assert.deepEqual(
      events.map((e) => `${e.Action} ${e.Actor.ID}`),
      ['create ev2', 'create ev2', 'create ev2', 'create ev2', 'prune '],
    );
    assert.deepEqual(events[0]?.Actor.Attributes, { driver: 'local' });
    assert.equal((await engine.docker(['volume', 'inspect', 'ev2'])).code, 1);
  });

  it("fails a local volume's mount with dockerd's message", async () => {
    await engine.dockerOk([
      'volume',
      'create',
      '-o',
      'type=none',
      '-o',
      'device=/nonexistent',
      '-o',
      'o=bind',
      'badmount',
    ]);
    const data = join(engine.dataRoot, 'volumes', 'badmount', '_data');
    const r = await engine.docker(['run', '--name', 'badmount-c', '-v', 'badmount:/x', 'busybox', 'true']);
    assert.notEqual(r.code, 0);
    const expected = `Error response from daemon: error while mounting volume '${data}': failed to mount local volume: mount /nonexistent:${data}, flags: 0x1000: no such file or directory`;
    assert.ok(r.stderr.includes(expected), r.stderr);
    assert.equal(await mounted(data), false);
    await engine.dockerOk(['rm', 'badmount-c']);
    await engine.dockerOk(['volume', 'rm', 'badmount']);
  });
});
