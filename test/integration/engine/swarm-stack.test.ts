import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TestEngine } from '../../helpers/engine.js';
import { eventually, eventuallyValue } from '../../helpers/eventually.js';
import { freePort } from '../../helpers/swarm-etcd.js';
import { leaveAndDestroy, runningTasks, startOneManagerSwarm } from '../../helpers/swarm-one.js';

/**
 * `docker stack deploy|ls|services|ps|rm` (issue 14 §8) on a one-manager swarm: the CLI makes the
 * stack's overlay network, its secret and config and its services through the engine's API, and
 * removes them all by their `com.docker.stack.namespace` label. The compose file has what the
 * issue names: two services, one with `deploy.replicas: 2`, a secret from a file, a config, a
 * host-mode port, and a service reached from another by its name over the stack's network.
 */
describe('swarm stacks', () => {
  let engine: TestEngine;
  let dir: string;
  let hostPort: number;

  before(async () => {
    ({ engine } = await startOneManagerSwarm());
    dir = await mkdtemp(join(tmpdir(), 'berth-stack-'));
    hostPort = await freePort();
    await writeFile(join(dir, 's1.txt'), 'the-secret\n');
    await writeFile(join(dir, 'c1.txt'), 'the-config\n');
    await writeFile(
      join(dir, 'compose.yml'),
      `version: "3.8"
services:
  web:
    image: busybox:latest
    command: ["sh", "-c", "mkdir -p /www && echo from-web > /www/index.html && exec httpd -f -p 8080 -h /www"]
    deploy:
      replicas: 2
    secrets: [s1]
    configs:
      - source: c1
        target: /etc/c1.conf
  front:
    image: busybox:latest
    command: ["sh", "-c", "mkdir -p /www && echo from-front > /www/index.html && exec httpd -f -p 80 -h /www"]
    ports:
      - target: 80
        published: ${hostPort}
        protocol: tcp
        mode: host
secrets:
  s1:
    file: ./s1.txt
configs:
  c1:
    file: ./c1.txt
`,
    );
  });
  after(async () => {
    await leaveAndDestroy(engine);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const stackLabel = (name: string) =>
    encodeURIComponent(JSON.stringify({ label: [`com.docker.stack.namespace=${name}`] }));

  it('deploys a stack, converges, serves by name and is removed cleanly', async () => {
    const out = await engine.dockerOk([
      'stack',
      'deploy',
      '--resolve-image',
      'never',
      '--detach=true',
      '-c',
      join(dir, 'compose.yml'),
      'app',
    ]);
    assert.match(out, /Creating network app_default/);
    assert.match(out, /Creating secret app_s1/);
    assert.match(out, /Creating config app_c1/);
    assert.match(out, /Creating service app_web/);
    assert.match(out, /Creating service app_front/);

    const network = (await engine.request('GET', `/networks?filters=${stackLabel('app')}`)).json<
      { Name: string; Driver: string; Scope: string }[]
    >();
    assert.deepEqual(
      network.map((n) => [n.Name, n.Driver, n.Scope]),
      [['app_default', 'overlay', 'swarm']],
    );

    const web = await eventuallyValue(
      'two running web tasks',
      () => runningTasks(engine, 'app_web'),
      (t) => t.length === 2,
      60_000,
    );
    await eventuallyValue(
      'one running front task',
      () => runningTasks(engine, 'app_front'),
      (t) => t.length === 1,
      60_000,
    );

    assert.match(await engine.dockerOk(['stack', 'ls', '--format', '{{.Name}} {{.Services}}']), /^app 2$/m);
    const services = await engine.dockerOk([
      'stack',
      'services',
      '--format',
      '{{.Name}} {{.Replicas}}',
      'app',
    ]);
    assert.match(services, /^app_web 2\/2$/m);
    assert.match(services, /^app_front 1\/1$/m);
    const ps = await engine.dockerOk(['stack', 'ps', '--format', '{{.Name}} {{.CurrentState}}', 'app']);
    assert.equal(ps.split('\n').filter((l) => /^app_(web\.[12]|front\.1) Running/.test(l)).length, 3);

    // the secret and the config inside a web task, where the compose file put them
    const webContainer = web[0]?.Status.ContainerStatus?.ContainerID ?? '';
    assert.equal(await engine.dockerOk(['exec', webContainer, 'cat', '/run/secrets/s1']), 'the-secret');
    assert.equal(await engine.dockerOk(['exec', webContainer, 'cat', '/etc/c1.conf']), 'the-config');

    // front reaches web by its service name over the stack's overlay network
    const front = (await runningTasks(engine, 'app_front'))[0]?.Status.ContainerStatus?.ContainerID ?? '';
    await eventually(
      'web answers by name from front',
      async () => {
        // nc, not wget: busybox-static's wget resolves through static glibc's NSS and crashes
        const r = await engine.docker([
          'exec',
          front,
          'sh',
          '-c',
          "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 web 8080",
        ]);
        return r.code === 0 && r.stdout.trim().endsWith('from-web');
      },
      30_000,
    );

    // the host-mode port answers on the node
    await eventually(
      'the host-mode port answers',
      async () => {
        const r = await fetch(`http://127.0.0.1:${hostPort}/`).catch(() => undefined);
        return r?.status === 200 && (await r.text()).trim() === 'from-front';
      },
      30_000,
    );

    const rmOut = await engine.dockerOk(['stack', 'rm', 'app']);
    assert.match(rmOut, /Removing service app_web/);
    assert.match(rmOut, /Removing network app_default/);
    await eventually(
      'every object of the stack gone',
      async () => {
        for (const kind of ['services', 'secrets', 'configs', 'networks']) {
          const list = (await engine.request('GET', `/${kind}?filters=${stackLabel('app')}`)).json<
            unknown[]
          >();
          if (list.length > 0) return false;
        }
        const filters = encodeURIComponent(JSON.stringify({ label: ['com.docker.stack.namespace=app'] }));
        const containers = (await engine.request('GET', `/containers/json?all=1&filters=${filters}`)).json<
          unknown[]
        >();
        return containers.length === 0;
      },
      30_000,
    );
    assert.equal((await engine.dockerOk(['stack', 'ls', '--format', '{{.Name}}'])).trim(), '');
  });
});
