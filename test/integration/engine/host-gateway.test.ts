import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';

/** `host-gateway` in --add-host: --host-gateway-ip, else the default bridge's address, else dockerd's error. */
describe('host-gateway without a default bridge', () => {
  const engines: TestEngine[] = [];
  after(async () => {
    await Promise.all(engines.map((e) => e.destroy()));
  });

  it('stands for --host-gateway-ip', async () => {
    const engine = await TestEngine.start({ bridge: 'none', args: ['--host-gateway-ip', '10.1.2.3'] });
    engines.push(engine);
    await ensureBusybox(engine);
    const line = await engine.dockerOk([
      'run',
      '--rm',
      '--add-host',
      'gw:host-gateway',
      'busybox',
      'grep',
      'gw',
      '/etc/hosts',
    ]);
    assert.equal(line, '10.1.2.3\tgw');
  });

  it('fails the start as dockerd does when there is nothing it can stand for', async () => {
    const engine = await TestEngine.start({ bridge: 'none' });
    engines.push(engine);
    await ensureBusybox(engine);
    const r = await engine.docker(['run', '--rm', '--add-host', 'gw:host-gateway', 'busybox', 'true']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /unable to derive the IP value for host-gateway/);
  });
});
