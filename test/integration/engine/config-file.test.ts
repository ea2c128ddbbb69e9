import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestEngine } from '../../helpers/engine.js';
import { runCommand } from '../../helpers/process.js';
import { ReferenceDockerd } from '../../helpers/reference-dockerd.js';
import { buildOciLayout, startTestRegistry } from '../../helpers/registry.js';

/**
 * `berth engine --config-file`: a daemon.json read at start (docker info shows what it set, in
 * dockerd 20.10's shape), refused as dockerd refuses a bad one, and read again on SIGHUP.
 */

type Json = Record<string, unknown>;

/** dockerd 20.10's /info for `--insecure-registry 10.1.0.0/16 --insecure-registry myreg:5000 --registry-mirror http://127.0.0.1:5999` (recorded). */
const DOCKERD_REGISTRY_CONFIG = {
  AllowNondistributableArtifactsCIDRs: [],
  AllowNondistributableArtifactsHostnames: [],
  InsecureRegistryCIDRs: ['10.1.0.0/16', '127.0.0.0/8'],
  IndexConfigs: {
    'docker.io': { Name: 'docker.io', Mirrors: ['http://127.0.0.1:5999/'], Secure: true, Official: true },
    'myreg:5000': { Name: 'myreg:5000', Mirrors: [], Secure: false, Official: false },
  },
  Mirrors: ['http://127.0.0.1:5999/'],
};

describe('engine configuration file (daemon.json)', () => {
  let dir: string;
  let engine: TestEngine;
  let path: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-config-file-'));
    path = join(dir, 'daemon.json');
    await writeFile(
      path,
      JSON.stringify({
        'insecure-registries': ['10.1.0.0/16', 'myreg:5000'],
        'registry-mirrors': ['http://127.0.0.1:5999'],
        'max-concurrent-downloads': 4,
        experimental: true,
      }),
    );
    engine = await TestEngine.start({ args: ['--config-file', path], bridge: 'none' });
  });
  after(async () => {
    await engine?.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  const info = async (version = '') => {
    const r = await engine.request('GET', `${version}/info`);
    assert.equal(r.status, 200);
    return r.json<Json>();
  };

  it("applies the file: docker info shows its registries as dockerd's and its experimental", async () => {
    const i = await info('/v1.41');
    assert.equal(i.IndexServerAddress, 'https://index.docker.io/v1/');
    assert.deepEqual(i.RegistryConfig, DOCKERD_REGISTRY_CONFIG);
    assert.equal(i.ExperimentalBuild, true);
    const text = await engine.dockerOk(['info']);
    assert.match(text, /Insecure Registries:\n\s+myreg:5000\n\s+10\.1\.0\.0\/16\n\s+127\.0\.0\.0\/8/);
    assert.match(text, /Registry Mirrors:\n\s+http:\/\/127\.0\.0\.1:5999\//);
  });

  it('reloads the registries on SIGHUP (daemon reload event) and keeps running on a bad file', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    await writeFile(
      path,
      JSON.stringify({
        'insecure-registries': ['other:5000'],
        'registry-mirrors': ['https://mirror.example/'],
        'max-concurrent-downloads': 4,
        experimental: true,
        debug: true,
      }),
    );
    assert.equal((await info()).Debug, false);
    process.kill(engine.pid as number, 'SIGHUP');
    let config: Json = {};
    for (let i = 0; i < 100; i++) {
      config = (await info()).RegistryConfig as Json;
      if (
        (config.Mirrors as string[]).length &&
        (config.Mirrors as string[])[0] === 'https://mirror.example/'
      )
        break;
      await sleep(50);
    }
    assert.deepEqual(config.Mirrors, ['https://mirror.example/']);
    assert.deepEqual(config.InsecureRegistryCIDRs, ['127.0.0.0/8']);
    assert.deepEqual(Object.keys(config.IndexConfigs as Json), ['docker.io', 'other:5000']);
    const events = await engine.events(since, '{{json .}}', ['type=daemon']);
    const reload = JSON.parse(events.split('\n').at(-1) ?? '{}') as {
      Action: string;
      Actor: { ID: string; Attributes: Record<string, string> };
    };
    assert.equal(reload.Action, 'reload');
    assert.equal(reload.Actor.ID, (await info()).ID);
    assert.equal(reload.Actor.Attributes['insecure-registries'], '["other:5000"]');
    assert.equal(reload.Actor.Attributes['registry-mirrors'], '["https://mirror.example/"]');
    assert.equal(reload.Actor.Attributes['max-concurrent-downloads'], '4');
    // debug (dockerd's -D) reloads: the engine's --log-level flag is no conflict
    assert.equal(reload.Actor.Attributes.debug, 'true');
    assert.equal((await info()).Debug, true);
    // and the engine's parts log at the new level: the API's request lines are debug ones
    await info('/v1.41');
    for (let i = 0; i < 50 && !/level=debug.*msg="request".*v1\.41\/info/.test(engine.log()); i++)
      await sleep(50);
    assert.match(engine.log(), /level=debug.*msg="request".*v1\.41\/info/);

    // a file the engine cannot take: logged, nothing changed, the engine goes on
    await writeFile(path, '{"registry-mirrors": ["http://x"], "nonsense": 1}');
    process.kill(engine.pid as number, 'SIGHUP');
    for (let i = 0; i < 100 && !engine.log().includes('nonsense'); i++) await sleep(50);
    assert.match(
      engine.log(),
      /reloading the configuration failed.*don't match any configuration option: nonsense/,
    );
    assert.deepEqual(((await info()).RegistryConfig as Json).Mirrors, ['https://mirror.example/']);
  });

  it('pulls through a mirror the file names only after a reload (the running pull path reads it)', async () => {
    const mirror = await startTestRegistry();
    try {
      const layout = join(dir, 'layout');
      await buildOciLayout(layout, { refName: 'v1' });
      const copied = await runCommand('skopeo', [
        'copy',
        '--dest-tls-verify=false',
        `oci:${layout}:v1`,
        `docker://${new URL(mirror.url).host}/library/reloaded:v1`,
      ]);
      assert.equal(copied.code, 0, copied.stderr);
      const pull = () => engine.request('POST', '/v1.41/images/create?fromImage=reloaded&tag=v1');
      assert.notEqual((await pull()).status, 200, 'no mirror of the file holds it yet');
      await writeFile(
        path,
        JSON.stringify({ 'registry-mirrors': [mirror.url], 'max-concurrent-downloads': 1 }),
      );
      process.kill(engine.pid as number, 'SIGHUP');
      let mirrors: unknown;
      for (let i = 0; i < 100; i++) {
        mirrors = ((await info()).RegistryConfig as Json).Mirrors;
        if (JSON.stringify(mirrors) === JSON.stringify([`${mirror.url}/`])) break;
        await sleep(50);
      }
      assert.deepEqual(mirrors, [`${mirror.url}/`]);
      const r = await pull();
      assert.equal(r.status, 200);
      assert.match(r.text(), /Downloaded newer image for reloaded:v1/);
    } finally {
      await mirror.stop();
    }
  });

  it('refuses to start on unknown keys, on a key given as a flag too, on a missing explicit file', async () => {
    const bad = join(dir, 'bad.json');
    // the engine's command line with roots of its own: it must end before it uses them
    const start = (file: string) =>
      runCommand(
        process.execPath,
        engine.commandLine({
          '--config-file': file,
          '--host': `unix://${join(dir, 'other.sock')}`,
          '--data-root': join(dir, 'other-data'),
          '--exec-root': join(dir, 'other-exec'),
        }),
        { timeoutMs: 30_000 },
      );
    await writeFile(bad, JSON.stringify({ foo: 1, 'data-root': '/elsewhere' }));
    let r = await start(bad);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /the following directives don't match any configuration option: foo\n/);
    await writeFile(bad, JSON.stringify({ 'data-root': '/elsewhere', bridge: 'x' }));
    r = await start(bad);
    assert.equal(r.code, 2, r.stderr);
    assert.ok(
      r.stderr.includes(
        `the following directives are specified both as a flag and in the configuration file: bridge: (from flag: none, from file: x), data-root: (from flag: ${join(dir, 'other-data')}, from file: /elsewhere)`,
      ),
      r.stderr,
    );
    r = await start(join(dir, 'missing.json'));
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /missing\.json: open \S+missing\.json: no such file or directory/);
    assert.equal(existsSync(join(dir, 'other-data')), false);
  });
});

describe("docker info's registry configuration: berth as dockerd 20.10", () => {
  it('shows the same IndexServerAddress and RegistryConfig for the same insecure registries', async () => {
    const insecure = ['10.1.2.3/16', 'localhost:5000', 'fd00::/8', '127.0.0.0/8', 'http://plain:5000'];
    const [berth, dockerd] = await Promise.all([
      TestEngine.start({ bridge: 'none', args: insecure.flatMap((r) => ['--insecure-registry', r]) }),
      ReferenceDockerd.start({ insecureRegistries: insecure }),
    ]);
    try {
      const pick = (i: Json) => ({
        IndexServerAddress: i.IndexServerAddress,
        RegistryConfig: i.RegistryConfig,
      });
      const b = pick((await berth.request('GET', '/v1.41/info')).json<Json>());
      const d = pick(JSON.parse(await dockerd.dockerOk(['info', '--format', '{{json .}}'])) as Json);
      assert.equal(JSON.stringify(b), JSON.stringify(d));
    } finally {
      await Promise.all([berth.destroy(), dockerd.destroy()]);
    }
  });
});
