import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { referenceJson } from '../../helpers/reference.js';

interface Inspect {
  Id: string;
  RepoTags: string[];
  RepoDigests: string[];
  Comment: string;
  Config: Record<string, unknown>;
  ContainerConfig: Record<string, unknown>;
  Size: number;
  VirtualSize?: number;
  GraphDriver: { Name: string; Data: Record<string, string> };
  RootFS: { Type: string; Layers: string[] };
  Metadata: { LastTagTime: string };
}

describe('images through the docker CLI and the API', () => {
  let engine: TestEngine;
  let tarPath: string;
  let tar: Buffer;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    tarPath = await busyboxTarball();
    tar = await readFile(tarPath);
  });

  after(async () => {
    await engine?.destroy();
  });

  const inspect = async (name: string): Promise<Inspect> => {
    const r = await engine.request('GET', `/v1.41/images/${encodeURIComponent(name)}/json`);
    assert.equal(r.status, 200, r.text());
    return r.json<Inspect>();
  };

  it("busybox:latest has sh and the default PATH; inspect has dockerd's shape", async () => {
    const img = await inspect('busybox');
    assert.deepEqual(img.RepoTags, ['busybox:latest']);
    assert.deepEqual(img.Config.Cmd, ['sh']);
    assert.deepEqual(img.Config.Env, ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin']);
    assert.equal(img.Comment, 'Imported from -');
    assert.equal(img.GraphDriver.Name, 'overlay2');
    assert.equal(img.RootFS.Layers.length, 1);
    assert.equal(img.VirtualSize, img.Size);
    // Same keys, same order as dockerd 20.10's answer.
    const reference = referenceJson('image-inspect.v1.41.json') as Record<string, unknown>;
    assert.deepEqual(Object.keys(img), Object.keys(reference));
    assert.deepEqual(Object.keys(img.Config), Object.keys(reference.Config as object));
    assert.deepEqual(Object.keys(img.GraphDriver.Data).sort(), ['MergedDir', 'UpperDir', 'WorkDir']);
    // 1.44 (docker CLI 28) drops VirtualSize
    const v144 = (await engine.request('GET', '/v1.44/images/busybox/json')).json<Inspect>();
    assert.equal(v144.VirtualSize, undefined);
  });

  it('docker import from a file with --change and -m', async () => {
    const out = await engine.dockerOk([
      'import',
      '--change',
      'CMD ["echo", "hi"]',
      '--change',
      'ENV A=1 B="two words"',
      '--change',
      'EXPOSE 8080/tcp 53/udp',
      '--change',
      'LABEL com.example.kind=test a.first=1',
      '--change',
      'WORKDIR /srv',
      '--change',
      'USER nobody',
      '--change',
      'VOLUME /data',
      '--change',
      'STOPSIGNAL SIGINT',
      '-m',
      'my message',
      tarPath,
      'localhost:5000/team/app:v1',
    ]);
    assert.match(out, /^sha256:[a-f0-9]{64}$/);
    const img = await inspect('localhost:5000/team/app:v1');
    assert.equal(img.Id, out);
    assert.deepEqual(img.RepoTags, ['localhost:5000/team/app:v1']);
    assert.deepEqual(img.Config.Cmd, ['echo', 'hi']);
    assert.deepEqual(img.Config.Env, ['A=1', 'B=two words']);
    // maps in Go's order (sorted keys), in the stored config and in inspect
    assert.deepEqual(Object.keys(img.Config.ExposedPorts as object), ['53/udp', '8080/tcp']);
    assert.deepEqual(Object.entries(img.Config.Labels as object), [
      ['a.first', '1'],
      ['com.example.kind', 'test'],
    ]);
    assert.equal(img.Config.WorkingDir, '/srv');
    assert.equal(img.Config.User, 'nobody');
    assert.deepEqual(img.Config.Volumes, { '/data': {} });
    assert.equal(img.Config.StopSignal, 'SIGINT');
    assert.equal(img.Comment, 'my message');
    const history = JSON.parse(
      await engine.dockerOk(['history', '--no-trunc', '--format', '{{json .}}', out]),
    );
    assert.equal(history.Comment, 'my message');
  });

  it('docker import from stdin (gzip) and the JSON stream of the API', async () => {
    const out = await engine.dockerOk(['import', '-', 'fromstdin:gz'], { input: gzipSync(tar) });
    assert.match(out, /^sha256:/);
    const busybox = await inspect('busybox');
    const img = await inspect('fromstdin:gz');
    assert.deepEqual(img.RootFS.Layers, busybox.RootFS.Layers, 'same content, same diff ID');
    const r = await engine.request('POST', '/v1.41/images/create?fromSrc=-&repo=raw&tag=t1', {
      body: tar,
      headers: { 'Content-Type': 'application/x-tar' },
    });
    assert.equal(r.status, 200);
    const lines = r
      .text()
      .trim()
      .split(/\r?\n/)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = lines[lines.length - 1] as { status: string };
    assert.match(last.status, /^sha256:[a-f0-9]{64}$/);
    assert.ok(
      lines.some((l) => l.status === 'Importing' && l.progressDetail),
      'progress while reading the body',
    );
  });

  it('imports from an http URL', async () => {
    const server: Server = createServer((_req, res) => {
      res.setHeader('Content-Length', tar.length);
      res.end(tar);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as { port: number }).port;
      const out = await engine.dockerOk(['import', `http://127.0.0.1:${port}/rootfs.tar`, 'fromurl:1']);
      assert.match(out, /sha256:[a-f0-9]{64}/);
      const img = await inspect('fromurl:1');
      assert.equal(img.Comment, `Imported from http://127.0.0.1:${port}/rootfs.tar`);
      const bad = await engine.docker(['import', `http://127.0.0.1:${port}/x`, 'Bad:name']);
      assert.notEqual(bad.code, 0);
    } finally {
      server.close();
    }
  });

  it('imports from a URL on any port, follows redirects, answers 404 for a missing file', async () => {
    // 6666 is on the Fetch standard's list of "bad ports" that node's fetch refuses
    const server: Server = createServer((req, res) => {
      if (req.url === '/moved') {
        res.writeHead(302, { Location: '/rootfs.tar' });
        res.end();
      } else if (req.url === '/rootfs.tar') {
        res.setHeader('Content-Length', tar.length);
        res.end(tar);
      } else {
        res.writeHead(404);
        res.end('no such file');
      }
    });
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(6666, '127.0.0.1', () => resolve(6666));
    }).catch(
      () =>
        new Promise<number>((resolve) =>
          server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
        ),
    );
    try {
      const out = await engine.dockerOk(['import', `http://127.0.0.1:${port}/moved`, 'fromurl:2']);
      assert.match(out, /sha256:[a-f0-9]{64}/);
      assert.equal((await inspect('fromurl:2')).Comment, `Imported from http://127.0.0.1:${port}/moved`);
      const missing = await engine.request(
        'POST',
        `/v1.41/images/create?fromSrc=${encodeURIComponent(`http://127.0.0.1:${port}/nothing`)}`,
      );
      assert.equal(missing.status, 404);
      assert.match(
        missing.json<{ message: string }>().message,
        /failed to GET .* with status 404 .*: no such file/,
      );
      const ftp = await engine.request('POST', '/v1.41/images/create?fromSrc=ftp%3A%2F%2F127.0.0.1%2Fx');
      assert.equal(ftp.status, 400);
      assert.match(ftp.json<{ message: string }>().message, /unsupported protocol scheme "ftp"/);
    } finally {
      server.close();
    }
  });

  it('docker images: filters, -q, -a, --digests, --format', async () => {
    const all = await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}']);
    for (const name of ['busybox:latest', 'localhost:5000/team/app:v1', 'fromstdin:gz', 'raw:t1']) {
      assert.ok(all.split('\n').includes(name), `${name} in ${all}`);
    }
    const ref = await engine.dockerOk([
      'images',
      '--filter',
      'reference=localhost:5000/team/*',
      '--format',
      '{{.Repository}}',
    ]);
    assert.equal(ref, 'localhost:5000/team/app');
    const label = await engine.dockerOk(['images', '-q', '--filter', 'label=com.example.kind=test']);
    assert.equal(label, (await inspect('localhost:5000/team/app:v1')).Id.slice(7, 19));
    const q = (await engine.dockerOk(['images', '-q', '--no-trunc'])).split('\n');
    assert.ok(q.every((l) => /^sha256:[a-f0-9]{64}$/.test(l)));
    assert.ok((await engine.dockerOk(['images', '-a', '-q'])).length > 0);
    const digests = await engine.dockerOk(['images', '--digests', 'busybox']);
    assert.match(digests.split('\n')[0] ?? '', /DIGEST/);
    const byName = await engine.dockerOk(['images', 'busybox', '--format', '{{.Repository}}']);
    assert.equal(byName, 'busybox');
    const since = await engine.dockerOk([
      'images',
      '--filter',
      'since=busybox',
      '--format',
      '{{.Repository}}',
    ]);
    assert.ok(!since.split('\n').includes('busybox'));
    assert.ok(since.split('\n').includes('raw'));
    const before = await engine.dockerOk([
      'images',
      '--filter',
      'before=raw:t1',
      '--format',
      '{{.Repository}}',
    ]);
    assert.ok(before.split('\n').includes('busybox'));
    assert.ok(!before.split('\n').includes('raw'));
    const bad = await engine.docker(['images', '--filter', 'nope=1']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /invalid filter 'nope'/);
    // API shapes
    const list = (await engine.request('GET', '/v1.41/images/json')).json<Array<Record<string, unknown>>>();
    const reference = referenceJson('images-list.v1.41.json') as Array<Record<string, unknown>>;
    assert.deepEqual(Object.keys(list[0] ?? {}), Object.keys(reference[0] ?? {}));
    assert.equal(list[0]?.Containers, -1);
    const legacy = (await engine.request('GET', '/v1.40/images/json?filter=raw')).json<
      Array<{ RepoTags: string[] }>
    >();
    assert.deepEqual(
      legacy.map((i) => i.RepoTags),
      [['raw:t1']],
    );
    const v144 = (await engine.request('GET', '/v1.44/images/json')).json<Array<Record<string, unknown>>>();
    assert.ok(!('VirtualSize' in (v144[0] ?? {})));
  });

  it('shared-size (1.42+): the size of the layers an image shares with others', async () => {
    const a = await engine.dockerOk(['import', '--change', 'ENV WHO=a', tarPath, 'shared:a']);
    const b = await engine.dockerOk(['import', '--change', 'ENV WHO=b', tarPath, 'shared:b']);
    assert.notEqual(a, b);
    type Row = { Id: string; Size: number; SharedSize: number };
    const rows = (await engine.request('GET', '/v1.44/images/json?shared-size=1')).json<Row[]>();
    const [ra, rb] = [rows.find((r) => r.Id === a), rows.find((r) => r.Id === b)];
    assert.ok(ra && rb);
    assert.equal(ra.SharedSize, ra.Size); // one layer, the same in both
    assert.equal(rb.SharedSize, rb.Size);
    const plain = (await engine.request('GET', '/v1.44/images/json')).json<Row[]>();
    assert.equal(plain.find((r) => r.Id === a)?.SharedSize, -1);
    const old = (await engine.request('GET', '/v1.41/images/json?shared-size=1')).json<Row[]>();
    assert.equal(old.find((r) => r.Id === a)?.SharedSize, -1);
    await engine.dockerOk(['rmi', 'shared:a', 'shared:b']);
  });

  it('docker tag, and tag errors over raw HTTP', async () => {
    await engine.dockerOk(['tag', 'busybox', 'localhost:5000/a/b:tag']);
    await engine.dockerOk(['tag', 'busybox', 'second']);
    const img = await inspect('localhost:5000/a/b:tag');
    // Sorted by full name, as dockerd: docker.io/library/... before localhost:5000/...
    assert.deepEqual(img.RepoTags, ['busybox:latest', 'second:latest', 'localhost:5000/a/b:tag']);
    assert.notEqual(img.Metadata.LastTagTime, '0001-01-01T00:00:00Z');
    const viaPath = await engine.request('GET', '/v1.41/images/localhost:5000/a/b:tag/json');
    assert.equal(viaPath.status, 200);
    const bad = await engine.request('POST', '/v1.41/images/busybox/tag?repo=Upper&tag=x');
    assert.equal(bad.status, 400);
    assert.match(bad.json<{ message: string }>().message, /repository name must be lowercase/);
    const badTag = await engine.request('POST', '/v1.41/images/busybox/tag?repo=ok&tag=-x');
    assert.equal(badTag.status, 400);
    const missing = await engine.request('POST', '/v1.41/images/nosuch/tag?repo=x');
    assert.equal(missing.status, 404);
    assert.equal(missing.json<{ message: string }>().message, 'No such image: nosuch:latest');
    const ok = await engine.request(
      'POST',
      '/v1.41/images/localhost:5000/a/b:tag/tag?repo=localhost:5000/c&tag=2',
    );
    assert.equal(ok.status, 201);
    assert.equal((await engine.request('GET', '/v1.41/images/localhost:5000/c:2/history')).status, 200);
    const del = await engine.request('DELETE', '/v1.41/images/localhost:5000/c:2');
    assert.deepEqual(del.json(), [{ Untagged: 'localhost:5000/c:2' }]);
    assert.equal(
      await engine.dockerOk(['rmi', 'localhost:5000/a/b:tag']),
      'Untagged: localhost:5000/a/b:tag',
    );
  });

  it('docker history', async () => {
    const out = await engine.dockerOk(['history', '--format', '{{.ID}} {{.Comment}}', 'busybox']);
    assert.match(out, /^[a-f0-9]{12} Imported from -$/);
    const r = await engine.request('GET', '/v1.41/images/busybox/history');
    const items = r.json<Array<Record<string, unknown>>>();
    const reference = referenceJson('image-history.v1.41.json') as Array<Record<string, unknown>>;
    assert.deepEqual(Object.keys(items[0] ?? {}), Object.keys(reference[0] ?? {}));
  });

  it('answers errors with the right status', async () => {
    const nf = await engine.request('GET', '/v1.41/images/nope/json');
    assert.equal(nf.status, 404);
    assert.equal(nf.json<{ message: string }>().message, 'No such image: nope:latest');
    const upper = await engine.request('GET', '/v1.41/images/Nope/json');
    assert.equal(upper.status, 400);
    assert.equal(
      upper.json<{ message: string }>().message,
      'invalid reference format: repository name must be lowercase',
    );
    assert.equal((await engine.request('GET', '/v1.41/images/nope/history')).status, 404);
    assert.equal((await engine.request('DELETE', '/v1.41/images/nope')).status, 404);
    const changes = await engine.request('POST', '/v1.41/images/create?fromSrc=-&changes=RUN%20true', {
      body: tar,
    });
    assert.equal(changes.status, 400);
    assert.match(changes.text(), /run is not a valid change command/);
    const digestRepo = await engine.request(
      'POST',
      `/v1.41/images/create?fromSrc=-&repo=x@sha256:${'a'.repeat(64)}`,
      { body: tar },
    );
    assert.equal(digestRepo.status, 400);
    const garbage = await engine.request('POST', '/v1.41/images/create?fromSrc=-', {
      body: Buffer.alloc(4096, 9),
    });
    assert.ok(garbage.status === 400 || /"error"/.test(garbage.text()), garbage.text());
    // a tarball cut short in the middle of a member: an error, and the engine lives on
    const cut = await engine.request('POST', '/v1.41/images/create?fromSrc=-&repo=cut', {
      body: tar.subarray(0, Math.floor(tar.length / 2)),
    });
    assert.ok(cut.status === 400 || /"error"/.test(cut.text()), cut.text());
    assert.match(cut.text(), /invalid layer tar/);
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
    assert.equal((await engine.request('GET', '/v1.41/images/cut/json')).status, 404);
    const pull = await engine.docker(['pull', 'alpine']);
    assert.notEqual(pull.code, 0);
    assert.match(pull.stderr + pull.stdout, /no registry mirror is configured for docker.io/);
    const badFilter = await engine.request(
      'GET',
      `/v1.41/images/json?filters=${encodeURIComponent('{"dangling":["maybe"]}')}`,
    );
    assert.equal(badFilter.status, 400);
  });

  it('docker rmi: untag, delete, conflicts and force', async () => {
    const id = await engine.dockerOk(['import', tarPath, 'rmme:1']);
    await engine.dockerOk(['tag', 'rmme:1', 'rmme:2']);
    await engine.dockerOk(['tag', 'rmme:1', 'other:1']);
    // By ID while several repositories reference it: 409 without force.
    const byId = await engine.request('DELETE', `/v1.41/images/${id.slice(7, 19)}`);
    assert.equal(byId.status, 409);
    assert.match(
      byId.json<{ message: string }>().message,
      /^conflict: unable to delete [a-f0-9]{12} \(must be forced\) - image is referenced in multiple repositories$/,
    );
    const untag = await engine.request('DELETE', '/v1.41/images/rmme:2');
    assert.deepEqual(untag.json(), [{ Untagged: 'rmme:2' }]);
    const out = await engine.dockerOk(['rmi', 'other:1']);
    assert.match(out, /Untagged: other:1/);
    const last = (await engine.request('DELETE', '/v1.41/images/rmme:1')).json<
      Array<Record<string, string>>
    >();
    assert.deepEqual(last[0], { Untagged: 'rmme:1' });
    assert.deepEqual(last[1], { Deleted: id });
    assert.equal((await engine.request('GET', `/v1.41/images/${id}/json`)).status, 404);
    // The shared busybox layer survives (busybox still uses it).
    assert.equal((await engine.request('GET', '/v1.41/images/busybox/json')).status, 200);
    // -f by ID with several repositories removes them all.
    const id2 = await engine.dockerOk(['import', tarPath, 'force:1']);
    await engine.dockerOk(['tag', 'force:1', 'force2:1']);
    const forced = await engine.dockerOk(['rmi', '-f', id2.slice(7, 19)]);
    assert.match(forced, /Untagged: force2:1/);
    assert.match(forced, /Untagged: force:1/);
    assert.match(forced, new RegExp(`Deleted: ${id2}`));
  });

  it('docker rmi conflicts with containers using the image', async () => {
    const id = await engine.dockerOk(['import', '--change', 'CMD ["sh"]', tarPath, 'used:1']);
    const create = await engine.docker(['create', 'used:1']);
    if (create.code !== 0) {
      assert.fail(`docker create failed (containers service): ${create.stderr}`);
    }
    const cid = create.stdout.trim();
    const byRef = await engine.request('DELETE', '/v1.41/images/used:1');
    assert.equal(byRef.status, 409);
    assert.match(
      byRef.json<{ message: string }>().message,
      /^conflict: unable to remove repository reference "used:1" \(must force\) - container [a-f0-9]{12} is using its referenced image [a-f0-9]{12}$/,
    );
    const byId = await engine.request('DELETE', `/v1.41/images/${id}`);
    assert.equal(byId.status, 409);
    assert.match(
      byId.json<{ message: string }>().message,
      /\(must be forced\) - image is being used by stopped container [a-f0-9]{12}$/,
    );
    // Forced: the image goes, the container's layers stay until the container goes.
    const forced = (await engine.request('DELETE', `/v1.41/images/used:1?force=1`)).json<
      Array<Record<string, string>>
    >();
    assert.deepEqual(forced[0], { Untagged: 'used:1' });
    assert.ok(forced.some((f) => f.Deleted === id));
    await engine.dockerOk(['rm', cid]);
    // A running container: no force helps.
    const id2 = await engine.dockerOk(['import', '--change', 'CMD ["sh"]', tarPath, 'running:1']);
    const run = await engine.docker(['run', '-d', 'running:1', 'sleep', '60']);
    assert.equal(run.code, 0, `docker run -d failed (containers service): ${run.stderr}`);
    const rid = run.stdout.trim();
    try {
      const hard = await engine.docker(['rmi', '-f', id2]);
      assert.notEqual(hard.code, 0);
      assert.match(
        hard.stderr,
        /conflict: unable to delete [a-f0-9]{12} \(cannot be forced\) - image is being used by running container [a-f0-9]{12}/,
      );
      // Forced by name: only untagged; the image stays for the running container.
      assert.equal(await engine.dockerOk(['rmi', '-f', 'running:1']), 'Untagged: running:1');
      assert.equal((await engine.request('GET', `/v1.41/images/${id2}/json`)).status, 200);
    } finally {
      await engine.docker(['rm', '-f', rid]);
    }
    assert.match(await engine.dockerOk(['rmi', id2]), new RegExp(`Deleted: ${id2}`));
  });

  it('an image being used by a create under way is not deleted from under it', async () => {
    for (let round = 0; round < 5; round++) {
      const tag = `racing:r${round}`;
      await engine.dockerOk(['import', '--change', `ENV ROUND=${round}`, tarPath, tag]);
      const [created, removed] = await Promise.all([
        engine.request('POST', '/v1.44/containers/create', { body: { Image: tag, Cmd: ['true'] } }),
        new Promise((r) => setTimeout(r, 1)).then(() => engine.request('DELETE', `/v1.44/images/${tag}`)),
      ]);
      if (created.status === 201) {
        // the container's image must still be there (rmi answered 409), or the untag left it
        const id = created.json<{ Id: string }>().Id;
        const image = (await engine.request('GET', `/v1.44/containers/${id}/json`)).json<{ Image: string }>()
          .Image;
        assert.equal(
          (await engine.request('GET', `/v1.44/images/${image}/json`)).status,
          200,
          removed.text(),
        );
        await engine.request('DELETE', `/v1.44/containers/${id}`);
      }
      await engine.request('DELETE', `/v1.44/images/${tag}?force=1`);
    }
  });

  it('docker image prune removes dangling images', async () => {
    const first = await engine.dockerOk(['import', '--change', 'CMD ["a"]', tarPath, 'dang:1']);
    await engine.dockerOk(['import', '--change', 'CMD ["b"]', tarPath, 'dang:1']);
    const dangling = await engine.dockerOk(['images', '-q', '--no-trunc', '--filter', 'dangling=true']);
    assert.ok(dangling.split('\n').includes(first));
    const out = await engine.dockerOk(['image', 'prune', '-f']);
    assert.match(out, new RegExp(`deleted: ${first}`, 'i'));
    assert.match(out, /Total reclaimed space/);
    assert.equal(await engine.dockerOk(['images', '-q', '--filter', 'dangling=true']), '');
    await engine.dockerOk(['rmi', 'dang:1']);
  });

  it('emits import, tag, untag and delete events', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = await engine.dockerOk(['import', tarPath, 'evt:1']);
    await engine.dockerOk(['rmi', 'evt:1']);
    const until = Math.floor(Date.now() / 1000) + 1;
    const r = await engine.request(
      'GET',
      `/v1.41/events?since=${since}&until=${until}&filters=${encodeURIComponent('{"type":["image"]}')}`,
    );
    const events = r
      .text()
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(
        (l) => JSON.parse(l) as { Action: string; Actor: { ID: string; Attributes: Record<string, string> } },
      )
      .filter((e) => e.Actor.ID === id);
    assert.deepEqual(
      events.map((e) => e.Action),
      ['tag', 'import', 'untag', 'delete'],
    );
    assert.equal(events[0]?.Actor.Attributes.name, 'evt:1');
    assert.equal(events[1]?.Actor.Attributes.name, id);
  });

  it('is consistent after a kill -9 in the middle of an import', async () => {
    const before = (await engine.request('GET', '/v1.41/images/json')).json<Array<{ Id: string }>>();
    // Half a tarball, then wait: the engine is extracting when it dies.
    const req = httpRequest({
      socketPath: engine.socket,
      method: 'POST',
      path: '/v1.41/images/create?fromSrc=-&repo=halfway',
      headers: { 'Content-Type': 'application/x-tar', 'Content-Length': String(tar.length) },
    });
    req.on('error', () => undefined);
    req.write(tar.subarray(0, Math.floor(tar.length / 2)));
    const overlay = join(engine.dataRoot, 'overlay');
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !(await readdir(overlay)).some((n) => n.startsWith('tmp-')))
      await sleep(20);
    assert.ok(
      (await readdir(overlay)).some((n) => n.startsWith('tmp-')),
      'import under way',
    );
    await engine.kill9();
    req.destroy();
    await engine.launch();
    assert.ok(!(await readdir(overlay)).some((n) => n.startsWith('tmp-')), 'half-extracted layer removed');
    assert.deepEqual(await readdir(join(engine.dataRoot, 'content', 'ingest')), []);
    const after = (await engine.request('GET', '/v1.41/images/json')).json<Array<{ Id: string }>>();
    assert.deepEqual(after.map((i) => i.Id).sort(), before.map((i) => i.Id).sort());
    assert.equal((await engine.request('GET', '/v1.41/images/halfway/json')).status, 404);
  });

  it('keeps images across a restart and a kill -9', async () => {
    const id = await engine.dockerOk(['import', tarPath, 'persist:1']);
    await engine.restart();
    assert.equal((await inspect('persist:1')).Id, id);
    await engine.dockerOk(['tag', 'persist:1', 'persist:2']);
    await engine.kill9();
    await engine.launch();
    const img = await inspect('persist:2');
    assert.equal(img.Id, id);
    assert.ok(img.RepoTags.includes('persist:1'));
  });
});
