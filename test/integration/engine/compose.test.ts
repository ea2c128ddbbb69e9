import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { requireTool, runCommand } from '../../helpers/process.js';
import { getLoopbackText } from '../../helpers/raw-http.js';

/**
 * docker-compose (Debian's 1.29.2, docker-py underneath) brings up a two-service application on
 * its project network: a busybox httpd and a client that reaches it by service name, the httpd's
 * port published on loopback and reached from the host; `down` removes everything.
 */

const COMPOSE = `version: "3.7"
services:
  web:
    image: busybox
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports:
      - "127.0.0.1::8080"
  client:
    image: busybox
    depends_on: [web]
    command:
      - sh
      - -c
      - "while true; do printf 'GET / HTTP/1.0\\\\r\\\\n\\\\r\\\\n' | nc -w 2 web 8080 && sleep 600; sleep 0.2; done"
`;

describe('docker-compose', () => {
  let engine: TestEngine;
  let dir: string;
  const compose = (args: string[]) =>
    runCommand(
      'docker-compose',
      ['--project-name', 'berthapp', '--file', join(dir, 'docker-compose.yml'), ...args],
      {
        env: { DOCKER_HOST: engine.host, COMPOSE_INTERACTIVE_NO_CLI: '1' },
        timeoutMs: 120_000,
      },
    );

  before(async () => {
    requireTool('docker-compose', "Debian's docker-compose is needed (scripts/install-deps.sh)");
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    dir = await mkdtemp(join(tmpdir(), 'berth-compose-'));
    await writeFile(join(dir, 'docker-compose.yml'), COMPOSE);
  });
  after(async () => {
    if (engine && dir) await compose(['down', '--volumes']).catch(() => undefined);
    await engine?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('brings up two services that reach each other by name, publishes a port, and down removes all', async () => {
    const up = await compose(['up', '-d']);
    assert.equal(up.code, 0, `${up.stdout}\n${up.stderr}`);
    // the client reaches the web service by its name through the engine's DNS
    await eventually(
      'the client to reach web by name',
      async () => (await compose(['logs', 'client'])).stdout.includes('hello-from-web'),
      30_000,
      300,
    );
    // the published port is reached from the host
    const port = Number((await compose(['port', 'web', '8080'])).stdout.trim().split(':').at(-1));
    assert.ok(port > 0);
    let body = '';
    await eventually('the published port to answer', async () => {
      body = await getLoopbackText(port);
      return body.includes('hello-from-web');
    });
    const nets = await engine.dockerOk(['network', 'ls', '--format', '{{.Name}}']);
    assert.match(nets, /^berthapp_default$/m);

    const down = await compose(['down']);
    assert.equal(down.code, 0, `${down.stdout}\n${down.stderr}`);
    assert.equal(await engine.dockerOk(['ps', '-aq']), '');
    assert.doesNotMatch(await engine.dockerOk(['network', 'ls', '--format', '{{.Name}}']), /berthapp/);
    assert.equal(await getLoopbackText(port), '');
  });
});
