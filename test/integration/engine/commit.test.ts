import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball, ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { startAll } from '../../helpers/start-all.js';

/**
 * docker commit on berth and on dockerd 20.10, the same steps on both: the images' config,
 * container config, history and parent, the events, the errors, all compared after IDs and
 * times are replaced by names.
 */

interface Side {
  name: string;
  socket: string;
  ok(args: string[]): Promise<string>;
  run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

function call(
  socket: string,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        socketPath: socket,
        method,
        path,
        headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** IDs and times to names, so that two engines' answers compare. */
class Names {
  private map = new Map<string, string>();
  name(value: string, label: string): void {
    this.map.set(value, label);
    if (/^sha256:[0-9a-f]{64}$/.test(value)) this.map.set(value.slice(7), `${label}-hex`);
    if (/^[0-9a-f]{64}$/.test(value)) this.map.set(value.slice(0, 12), `${label}-short`);
  }
  apply(text: string): string {
    let out = text;
    for (const [k, v] of [...this.map].sort((a, b) => b[0].length - a[0].length)) out = out.split(k).join(v);
    return out
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
      .replace(/"(time|timeNano)":\d+/g, '"$1":0')
      .replace(/"docker_version":"[^"]*"/g, '"docker_version":"<v>"')
      .replace(/"DockerVersion":"[^"]*"/g, '"DockerVersion":"<v>"');
  }
}

const INSPECT_KEYS = [
  'Parent',
  'Comment',
  'Container',
  'ContainerConfig',
  'Author',
  'Config',
  'Architecture',
  'Os',
  'Size',
];

/** The steps, on one engine; what they gave, with names in place of IDs. */
async function scenario(side: Side): Promise<Record<string, unknown>> {
  const names = new Names();
  const out: Record<string, unknown> = {};
  const inspect = async (ref: string, label: string) => {
    const r = await call(side.socket, 'GET', `/v1.41/images/${ref}/json`);
    assert.equal(r.status, 200, `${side.name}: ${r.text}`);
    const full = JSON.parse(r.text) as Record<string, unknown>;
    names.name(full.Id as string, label);
    const picked = Object.fromEntries(INSPECT_KEYS.map((k) => [k, full[k]]));
    picked.Layers = ((full.RootFS as { Layers?: string[] }).Layers ?? []).length;
    return picked;
  };
  const history = async (ref: string) => {
    const r = await call(side.socket, 'GET', `/v1.41/images/${ref}/history`);
    const items = JSON.parse(r.text) as Array<Record<string, unknown>>;
    return items.map((h) => ({ ...h, Created: 0 }));
  };
  names.name(await side.ok(['image', 'inspect', '-f', '{{.Id}}', 'busybox']), 'busybox');
  const since = Math.floor(Date.now() / 1000) - 1;

  // a running container with labels and env: changes, message, author, tag
  const c1 = await side.ok([
    'run',
    '-d',
    '--name',
    'c1',
    '--label',
    'a=b',
    '-e',
    'FOO=bar',
    'busybox',
    'sh',
    '-c',
    'echo hi > /x; sleep 1000',
  ]);
  names.name(c1, 'c1');
  for (let i = 0; i < 100; i++) {
    if ((await side.run(['exec', 'c1', 'cat', '/x'])).stdout.trim() === 'hi') break;
  }
  const img1 = await side.ok([
    'commit',
    '--change',
    'CMD ["cat","/x"]',
    '--change',
    'ENV A=1 FOO=baz',
    '--change',
    'EXPOSE 80 53/udp',
    '-m',
    'my message',
    '-a',
    'Someone <someone@example.com>',
    'c1',
    'img1:v1',
  ]);
  names.name(img1, 'img1');
  out.img1 = await inspect('img1:v1', 'img1');
  out.img1History = await history('img1:v1');
  out.img1Run = await side.ok(['run', '--rm', 'img1:v1']);
  out.c1State = await side.ok(['inspect', '-f', '{{.State.Status}} {{.State.Paused}}', 'c1']);

  // more instructions, over a stopped container without labels; repo without a tag
  const c2 = await side.ok(['create', '--name', 'c2', '-v', '/data', '-w', '/tmp', 'busybox', 'true']);
  names.name(c2, 'c2');
  const img2 = await side.ok([
    'commit',
    '--change',
    'ENTRYPOINT ["/bin/sh","-c"]',
    '--change',
    'WORKDIR sub',
    '--change',
    'USER nobody',
    '--change',
    'LABEL x=y "z"="w w"',
    '--change',
    'VOLUME /v1 /v2',
    '--change',
    'ONBUILD RUN echo hello',
    '--change',
    'HEALTHCHECK --interval=5s --retries=2 CMD true',
    'c2',
    'img2',
  ]);
  names.name(img2, 'img2');
  out.img2 = await inspect('img2', 'img2');
  out.img2History = await history('img2');

  // no pause of a running container; a config in the body merged with the container's
  const c3 = await side.ok(['run', '-d', '--name', 'c3', 'busybox', 'sleep', '1000']);
  names.name(c3, 'c3');
  const img3 = await side.ok(['commit', '--pause=false', 'c3']);
  names.name(img3, 'img3');
  out.img3 = await inspect(img3, 'img3');
  const body = await call(
    side.socket,
    'POST',
    '/v1.41/commit?container=c3&repo=img4&tag=t&changes=ENV%20C%3D3&comment=from%20body',
    JSON.stringify({ Cmd: ['echo', 'body'], Env: ['B=2'], Labels: { l: '1' } }),
  );
  assert.equal(body.status, 201, `${side.name}: ${body.text}`);
  names.name((JSON.parse(body.text) as { Id: string }).Id, 'img4');
  out.img4 = await inspect('img4:t', 'img4');
  out.img4Run = await side.ok(['run', '--rm', 'img4:t']);

  // a container made through the API (no labels): body Healthcheck merged field by field
  const created = await call(
    side.socket,
    'POST',
    '/v1.41/containers/create?name=c4',
    JSON.stringify({
      Image: 'busybox',
      Cmd: ['true'],
      Entrypoint: ['/bin/sh'],
      Healthcheck: { Test: ['CMD', 'true'], Interval: 1_000_000_000 },
    }),
  );
  names.name((JSON.parse(created.text) as { Id: string }).Id, 'c4');
  const c4 = await call(
    side.socket,
    'POST',
    '/v1.41/commit?container=c4&changes=ENTRYPOINT%20%5B%5D&changes=EXPOSE%2080',
    JSON.stringify({ Healthcheck: { Retries: 3 }, Cmd: ['x'] }),
  );
  assert.equal(c4.status, 201, `${side.name}: ${c4.text}`);
  const img5 = (JSON.parse(c4.text) as { Id: string }).Id;
  names.name(img5, 'img5');
  out.img5 = await inspect(img5, 'img5');

  // the events of the commits that worked (dockerd 20.10 pauses twice for some failing ones)
  const events = await side.ok([
    'events',
    '--since',
    String(since),
    '--until',
    String(Math.floor(Date.now() / 1000) + 1),
    '--filter',
    'event=commit',
    '--filter',
    'event=pause',
    '--filter',
    'event=unpause',
    '--filter',
    'event=tag',
    '--format',
    '{{json .}}',
  ]);
  out.events = events
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const e = JSON.parse(l) as Record<string, unknown>;
      return { Type: e.Type, Action: e.Action, Actor: e.Actor as { ID: string } };
    })
    // the setup's busybox may fall in the window (--since is whole seconds)
    .filter((e) => !(e.Type === 'image' && names.apply(e.Actor.ID) === 'busybox'));
  // errors
  const errors: Record<string, unknown> = {};
  for (const [label, path] of [
    ['noContainer', '/v1.41/commit?container=nope'],
    ['emptyName', '/v1.41/commit'],
    ['run', '/v1.41/commit?container=c1&changes=RUN%20true'],
    ['expose', '/v1.41/commit?container=c1&changes=EXPOSE%20abc'],
    ['sha256Repo', '/v1.41/commit?container=c1&repo=sha256'],
    ['argCount', '/v1.41/commit?container=c1&changes=USER'],
    ['badTag', '/v1.41/commit?container=c1&repo=ok&tag=b%40d'],
    ['badRepo', '/v1.41/commit?container=c1&repo=BAD'],
  ] as const) {
    const r = await call(side.socket, 'POST', path);
    // dockerd 20.10 finds a bad repo or tag after making the image and answers 500; berth
    // refuses it first, with 400 and the same message
    const status = label === 'badTag' || label === 'badRepo' ? (r.status === 500 ? 400 : r.status) : r.status;
    errors[label] = { status, body: r.text.trim() };
  }
  // a tag without a repository is ignored
  const tagOnly = await call(side.socket, 'POST', '/v1.41/commit?container=c1&tag=x');
  errors.tagOnly = {
    status: tagOnly.status,
    tags: (await side.ok(['images', '--format', '{{.Tag}}'])).includes('x'),
  };
  const cli = await side.run(['commit', '--change', 'FROM busybox', 'c1']);
  errors.cli = { code: cli.code, stderr: cli.stderr.trim() };
  out.errors = errors;

  await side.run(['rm', '-f', 'c1', 'c2', 'c3', 'c4']);
  return JSON.parse(names.apply(JSON.stringify(out))) as Record<string, unknown>;
}

describe('docker commit: berth as dockerd 20.10', () => {
  let berth: TestEngine;
  let dockerd: ReferenceDockerd;

  before(async () => {
    [berth, dockerd] = await startAll([TestEngine.start(), ReferenceDockerd.start()]);
    await ensureBusybox(berth);
    await dockerd.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), 'busybox:latest']);
  });
  after(async () => {
    await Promise.all([berth?.destroy(), dockerd?.destroy()]);
  });

  it('gives the same images, history, events and errors', async () => {
    const sides: Side[] = [
      {
        name: 'berth',
        socket: berth.socket,
        ok: (a) => berth.dockerOk(a, { timeoutMs: 60_000 }),
        run: (a) => berth.docker(a, { timeoutMs: 60_000 }),
      },
      {
        name: 'dockerd',
        socket: dockerd.socket,
        ok: (a) => dockerd.dockerOk(a, { timeoutMs: 60_000, cli: 'docker' }),
        run: (a) => dockerd.docker(a, { timeoutMs: 60_000, cli: 'docker' }),
      },
    ];
    const [b, d] = await Promise.all(sides.map(scenario));
    assert.ok(b && d);
    for (const k of Object.keys(b)) assert.deepEqual(b[k], d[k], `${k} differs`);
    assert.deepEqual(Object.keys(b).sort(), Object.keys(d).sort());
  });

  it('unpauses after a failed commit, leaves a paused container paused, keeps the layer', async () => {
    await berth.dockerOk(['run', '-d', '--name', 'p1', 'busybox', 'sh', '-c', 'echo a > /f; sleep 1000']);
    const bad = await berth.docker(['commit', '--change', 'RUN true', 'p1']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /run is not a valid change command/);
    assert.equal(await berth.dockerOk(['inspect', '-f', '{{.State.Status}}', 'p1']), 'running');
    await berth.dockerOk(['pause', 'p1']);
    const id = await berth.dockerOk(['commit', '-m', 'while paused', 'p1', 'paused:img']);
    assert.equal(await berth.dockerOk(['inspect', '-f', '{{.State.Status}}', 'p1']), 'paused');
    await berth.dockerOk(['unpause', 'p1']);
    assert.equal(await berth.dockerOk(['run', '--rm', id, 'cat', '/f']), 'a');
    const hist = await berth.dockerOk([
      'history',
      '--no-trunc',
      '--format',
      '{{.CreatedBy}}|{{.Comment}}',
      id,
    ]);
    assert.equal(hist.split('\n')[0], 'sh -c echo a > /f; sleep 1000|while paused');
    // an unchanged container: an image without a new layer, history marked empty_layer
    await berth.dockerOk(['create', '--name', 'e1', 'busybox', 'true']);
    const empty = await berth.dockerOk(['commit', 'e1']);
    const saved = await berth.request('GET', `/images/${empty}/json`);
    const layers = (saved.json() as { RootFS: { Layers: string[] } }).RootFS.Layers;
    const base = await berth.request('GET', '/images/busybox/json');
    assert.deepEqual(layers, (base.json() as { RootFS: { Layers: string[] } }).RootFS.Layers);
    await berth.dockerOk(['rm', '-f', 'p1', 'e1']);
  });
});
