import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { startAll } from '../../helpers/start-all.js';

/** Which runtime holds a running container: its state directory under the engine's exec root. */
async function runtimeOf(engine: TestEngine, id: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of ['runc', 'crun']) {
    if (
      await stat(join(engine.execRoot, name, id)).then(
        () => true,
        () => false,
      )
    ) {
      found.push(name);
    }
  }
  return found;
}

interface Info {
  DefaultRuntime: string;
  Runtimes: Record<string, { path: string }>;
}

describe('runtime selection: crun by default, runc per engine and per container', () => {
  // the engine's own flags, read at each launch: emptied to restart it with the default runtime
  const args = ['--runtime', 'runc'];
  let engine: TestEngine;
  let crunEngine: TestEngine;
  before(async () => {
    [engine, crunEngine] = await startAll([TestEngine.start({ args }), TestEngine.start()]);
    await Promise.all([ensureBusybox(engine), ensureBusybox(crunEngine)]);
  });
  after(async () => {
    await Promise.all([engine?.destroy(), crunEngine?.destroy()]);
  });

  it('defaults to crun here (hybrid cgroups included); HostConfig.Runtime runc runs runc', async () => {
    const info = (await crunEngine.request('GET', '/info')).json<Info>();
    assert.equal(info.DefaultRuntime, 'crun');
    assert.deepEqual(Object.keys(info.Runtimes).sort(), ['crun', 'runc']);
    const byDefault = await crunEngine.dockerOk(['run', '-d', 'busybox', 'sleep', '600']);
    const withRunc = await crunEngine.dockerOk(['run', '-d', '--runtime', 'runc', 'busybox', 'sleep', '600']);
    assert.deepEqual(await runtimeOf(crunEngine, byDefault), ['crun']);
    assert.deepEqual(await runtimeOf(crunEngine, withRunc), ['runc']);
    assert.equal(await crunEngine.dockerOk(['inspect', '-f', '{{.HostConfig.Runtime}}', byDefault]), 'crun');
    assert.equal(await crunEngine.dockerOk(['inspect', '-f', '{{.HostConfig.Runtime}}', withRunc]), 'runc');
    for (const id of [byDefault, withRunc]) {
      assert.equal(await crunEngine.dockerOk(['exec', id, 'echo', 'hi']), 'hi');
      await crunEngine.dockerOk(['pause', id]);
      await crunEngine.dockerOk(['unpause', id]);
      assert.match(await crunEngine.dockerOk(['top', id]), /sleep 600/);
      await crunEngine.dockerOk(['rm', '-f', id]);
      assert.deepEqual(await runtimeOf(crunEngine, id), []);
    }
    const bad = await crunEngine.docker(['run', '--runtime', 'nosuch', 'busybox', 'true']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /Unknown runtime specified nosuch/);
  });

  it('--runtime runc makes runc the default; a container can still choose crun', async () => {
    const info = (await engine.request('GET', '/info')).json<Info>();
    assert.equal(info.DefaultRuntime, 'runc');
    const byDefault = await engine.dockerOk(['run', '-d', '--name', 'on-runc', 'busybox', 'sleep', '600']);
    const withCrun = await engine.dockerOk(['run', '-d', '--runtime', 'crun', 'busybox', 'sleep', '600']);
    assert.deepEqual(await runtimeOf(engine, byDefault), ['runc']);
    assert.deepEqual(await runtimeOf(engine, withCrun), ['crun']);
    assert.equal(await engine.dockerOk(['exec', withCrun, 'echo', 'hi']), 'hi');
    await engine.dockerOk(['rm', '-f', withCrun]);
  });

  it('after a kill -9 and a restart with crun as the default, the runc container is still runc', async () => {
    await engine.kill9();
    args.length = 0;
    await engine.launch();
    assert.equal((await engine.request('GET', '/info')).json<Info>().DefaultRuntime, 'crun');
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.Running}}', 'on-runc']), 'true');
    assert.equal(await engine.dockerOk(['exec', 'on-runc', 'echo', 'still']), 'still');
    await engine.dockerOk(['stop', '-t', '1', 'on-runc']);
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.ExitCode}}', 'on-runc']), '137');
    await engine.dockerOk(['start', 'on-runc']);
    assert.deepEqual(
      await runtimeOf(engine, await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'on-runc'])),
      ['runc'],
    );
    await engine.dockerOk(['rm', '-f', 'on-runc']);
  });
});
