import assert from 'node:assert/strict';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { tempDir } from '../../helpers/registry.js';
import { type ReferenceRegistry, startReferenceRegistry } from '../../helpers/registry-reference.js';
import { startAll } from '../../helpers/start-all.js';

/** POST on a unix socket; the status and the JSON lines of the answer. */
function post(
  socket: string,
  path: string,
): Promise<{ status: number; lines: Array<Record<string, unknown>> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path, method: 'POST' }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => {
        const lines = text
          .split(/\r?\n/)
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        resolve({ status: res.statusCode ?? 0, lines });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * The shape of a pull's messages: the lines without an id as they are, and for each layer the
 * statuses it went through (repeats of Downloading/Extracting collapsed), with the keys of each
 * (Verifying Checksum left out: dockerd sends it or not, by timing).
 */
function shape(lines: Array<Record<string, unknown>>) {
  const global: string[] = [];
  const layers = new Map<string, string[]>();
  const keys = new Map<string, string>();
  for (const l of lines) {
    const status = String(l.status);
    // dockerd's progress broadcaster may drop this one when Download complete follows at once
    if (status === 'Verifying Checksum') continue;
    keys.set(status.replace(/sha256:[0-9a-f]+/, 'sha256:X'), Object.keys(l).join(','));
    if (l.id === undefined || /^Pulling from/.test(status)) {
      global.push(status);
      continue;
    }
    const id = String(l.id);
    const seen = layers.get(id) ?? [];
    if (seen.at(-1) !== status) seen.push(status);
    layers.set(id, seen);
  }
  return {
    global,
    layers: Object.fromEntries([...layers].sort()),
    keys: Object.fromEntries([...keys].sort()),
  };
}

describe('berth pulls what the reference dockerd pushed, as dockerd pulls it', () => {
  let registry: ReferenceRegistry;
  let dockerd: ReferenceDockerd;
  let engine: TestEngine;
  let name: string;

  before(async () => {
    registry = await startReferenceRegistry(await tempDir());
    name = `${registry.hostPort}/bb`;
    [dockerd, engine] = await startAll([ReferenceDockerd.start(), TestEngine.start()]);
    await dockerd.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), `${name}:base`]);
    await dockerd.dockerOk([
      'run',
      '--name',
      'mk',
      `${name}:base`,
      'sh',
      '-c',
      'head -c 3000000 /dev/urandom > /big',
    ]);
    await dockerd.dockerOk(['commit', 'mk', `${name}:two`]);
    await dockerd.dockerOk(['rm', 'mk']);
    await dockerd.dockerOk(['push', `${name}:base`]);
    await dockerd.dockerOk(['push', `${name}:two`]);
    await dockerd.dockerOk(['rmi', `${name}:base`, `${name}:two`]);
  });

  after(async () => {
    await engine?.destroy();
    await dockerd?.stop();
    await registry?.stop();
  });

  it('gives the same image, digests and message shape', async () => {
    const path = `/v1.41/images/create?fromImage=${encodeURIComponent(name)}&tag=two`;
    const theirs = await post(dockerd.socket, path);
    const ours = await post(engine.socket, path);
    assert.equal(ours.status, theirs.status);
    assert.deepEqual(shape(ours.lines), shape(theirs.lines));
    const progress = ours.lines.find((l) => l.status === 'Downloading');
    assert.match(String(progress?.progress), /^\[=*>\s*\] +[\d.]+[kM]?B\/[\d.]+[kM]?B$/);

    const fmt = '{{.Id}} {{.RepoDigests}} {{.RootFS.Layers}}';
    const theirImage = await dockerd.dockerOk(['image', 'inspect', '--format', fmt, `${name}:two`]);
    const ourImage = await engine.dockerOk(['image', 'inspect', '--format', fmt, `${name}:two`]);
    assert.equal(ourImage, theirImage);

    // the base layer is there: Already exists; again: up to date
    const base = `/v1.41/images/create?fromImage=${encodeURIComponent(name)}&tag=base`;
    assert.deepEqual(
      shape((await post(engine.socket, base)).lines),
      shape((await post(dockerd.socket, base)).lines),
    );
    assert.deepEqual(
      shape((await post(engine.socket, path)).lines),
      shape((await post(dockerd.socket, path)).lines),
    );
  });

  it('logs the pull events dockerd logs', async () => {
    const until = Math.ceil(Date.now() / 1000) + 1;
    const filters = encodeURIComponent(JSON.stringify({ type: ['image'], event: ['pull'] }));
    const events = async (socket: string) =>
      new Promise<string[]>((resolve, reject) => {
        const req = request(
          {
            socketPath: socket,
            method: 'GET',
            path: `/v1.41/events?since=0&until=${until}&filters=${filters}`,
          },
          (res) => {
            let t = '';
            res.on('data', (c) => {
              t += c;
            });
            res.on('end', () =>
              resolve(
                t
                  .split('\n')
                  .filter((l) => l.trim())
                  .map(
                    (l) =>
                      JSON.parse(l) as {
                        Action: string;
                        Actor: { ID: string; Attributes: Record<string, string> };
                      },
                  )
                  .map((e) => `${e.Action} ${e.Actor.ID} ${JSON.stringify(e.Actor.Attributes)}`),
              ),
            );
          },
        );
        req.on('error', reject);
        req.end();
      });
    const ours = await events(engine.socket);
    const theirs = await events(dockerd.socket);
    assert.ok(ours.length > 0);
    assert.deepEqual(ours, theirs);
  });

  it('answers a missing tag and a missing repository as dockerd does', async () => {
    for (const path of [
      `/v1.41/images/create?fromImage=${encodeURIComponent(name)}&tag=nope`,
      `/v1.41/images/create?fromImage=${encodeURIComponent(`${registry.hostPort}/absent`)}&tag=latest`,
      `/v1.41/images/create?fromImage=${encodeURIComponent(name)}&tag=sha256:${'0'.repeat(64)}`,
    ]) {
      const theirs = await post(dockerd.socket, path).catch(() => undefined);
      const ours = await post(engine.socket, path).catch(() => undefined);
      assert.equal(ours?.status, theirs?.status, path);
    }
    const raw = async (socket: string) =>
      new Promise<string>((resolve, reject) => {
        const req = request(
          {
            socketPath: socket,
            method: 'POST',
            path: `/v1.41/images/create?fromImage=${encodeURIComponent(name)}&tag=nope`,
          },
          (res) => {
            let t = '';
            res.on('data', (c) => {
              t += c;
            });
            res.on('end', () => resolve(t));
          },
        );
        req.on('error', reject);
        req.end();
      });
    assert.equal((await raw(engine.socket)).trim(), (await raw(dockerd.socket)).trim());
  });

  it('pushes what it pulled to another registry without the blob (tar-split), and saves it; dockerd gets the same image', async () => {
    // a layer dockerd wrote itself (Go's tar): whiteouts, an opaque directory, links, long names
    const deep = `/${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(60)}`;
    await dockerd.dockerOk([
      'run',
      '--name',
      'mk3',
      `${name}:two`,
      'sh',
      '-c',
      `rm /big /bin/ls && rm -rf /root && mkdir /root && echo hi > /root/new && ln -s /root/new /sym && ln /root/new /hard && mkdir -p ${deep} && touch ${deep}/empty && head -c 200000 /dev/urandom > ${deep}/data`,
    ]);
    await dockerd.dockerOk(['commit', 'mk3', `${name}:three`]);
    await dockerd.dockerOk(['rm', 'mk3']);
    await dockerd.dockerOk(['push', `${name}:three`]);
    const id = await dockerd.dockerOk(['image', 'inspect', '--format', '{{.Id}}', `${name}:three`]);
    await dockerd.dockerOk(['rmi', `${name}:three`]);

    const other = await startReferenceRegistry(await tempDir());
    try {
      await engine.dockerOk(['pull', `${name}:three`]);
      const copy = `${other.hostPort}/copy:1`;
      await engine.dockerOk(['tag', `${name}:three`, copy]);
      const out = await engine.dockerOk(['push', copy]);
      assert.equal((out.match(/: Pushed$/gm) ?? []).length, 3, out);
      await dockerd.dockerOk(['pull', copy]);
      assert.equal(await dockerd.dockerOk(['image', 'inspect', '--format', '{{.Id}}', copy]), id);
      await dockerd.dockerOk(['rmi', copy]);
      // docker save rebuilds the layers the same way; dockerd loads the same image
      const saved = join(await tempDir(), 'three.tar');
      await engine.dockerOk(['save', '-o', saved, `${name}:three`]);
      await dockerd.dockerOk(['load', '-i', saved]);
      assert.equal(await dockerd.dockerOk(['image', 'inspect', '--format', '{{.Id}}', `${name}:three`]), id);
      await dockerd.dockerOk(['rmi', `${name}:three`]);
    } finally {
      await other.stop();
    }
  });
});
