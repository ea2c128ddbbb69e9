import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import {
  apiWarnings,
  isLoopback,
  loadTlsOptions,
  prepareFrontDoor,
  resolveSocketGroup,
} from '../../../../src/engine/api/listen.js';
import { defaultEngineConfig, type EngineConfig } from '../../../../src/engine/config.js';
import { makeTestCertificates, type TestCertificates } from '../../../helpers/tls-certs.js';

const quiet = new Logger('error');
const config = (over: Partial<EngineConfig>): EngineConfig => ({ ...defaultEngineConfig, ...over });

describe('engine front door', () => {
  let dir: string;
  let certs: TestCertificates;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-listen-'));
    certs = await makeTestCertificates(join(dir, 'certs'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a tcp:// host without TLS on an address other than loopback unless confirmed', async () => {
    for (const host of ['tcp://0.0.0.0:2375', 'tcp://[::]:2375', 'tcp://192.0.2.10:2375']) {
      await assert.rejects(
        prepareFrontDoor(config({ hosts: [host] }), quiet),
        /refusing to listen on tcp:\/\/.* without TLS: anyone who reaches this address gets root access on this host.*--insecure-tcp-without-tls/,
        host,
      );
      const door = await prepareFrontDoor(config({ hosts: [host], insecureTcpWithoutTls: true }), quiet);
      assert.equal(door.addresses[0]?.kind, 'tcp');
    }
    // loopback needs no confirmation; TLS neither (the default port is then 2376)
    for (const host of [
      'tcp://127.0.0.1:2375',
      'tcp://127.1.2.3:1',
      'tcp://[::1]:2375',
      'tcp://localhost:2375',
    ]) {
      await prepareFrontDoor(config({ hosts: [host] }), quiet);
    }
    const tls = { verify: true, caFile: certs.ca, certFile: certs.serverCert, keyFile: certs.serverKey };
    const door = await prepareFrontDoor(config({ hosts: ['tcp://0.0.0.0'], tls }), quiet);
    assert.deepEqual(door.addresses[0], { kind: 'tcp', host: '0.0.0.0', port: 2376 });
    assert.equal(door.tls?.requestCert, true);
    assert.equal(door.tls?.rejectUnauthorized, true);
  });

  it('tells loopback hosts from others', async () => {
    assert.equal(await isLoopback('127.0.0.1'), true);
    assert.equal(await isLoopback('::1'), true);
    assert.equal(await isLoopback('::ffff:127.0.0.1'), true);
    assert.equal(await isLoopback('localhost'), true);
    assert.equal(await isLoopback('0.0.0.0'), false);
    assert.equal(await isLoopback('::'), false);
    assert.equal(await isLoopback('10.0.0.1'), false);
  });

  it('reads the TLS files and says which one is wrong', async () => {
    const ok = await loadTlsOptions({ verify: false, certFile: certs.serverCert, keyFile: certs.serverKey });
    assert.equal(ok.requestCert, false);
    assert.equal(ok.ca, undefined);
    await assert.rejects(
      loadTlsOptions({ verify: false, certFile: join(dir, 'missing.pem'), keyFile: certs.serverKey }),
      /could not read the TLS certificate \(--tlscert\) .*missing\.pem/,
    );
    await assert.rejects(
      loadTlsOptions({ verify: false, certFile: certs.serverCert, keyFile: join(certs.rogueDir, 'key.pem') }),
      /invalid TLS configuration/,
    );
    await assert.rejects(
      loadTlsOptions({ verify: true, certFile: certs.serverCert, keyFile: certs.serverKey }),
      /--tlsverify needs a CA/,
    );
  });

  it('finds the socket group as dockerd: a name, else a gid; a missing docker group is only a warning', async () => {
    assert.equal(await resolveSocketGroup('root', quiet), 0);
    assert.equal(await resolveSocketGroup('4242', quiet), 4242);
    assert.equal(await resolveSocketGroup('', quiet), undefined);
    await assert.rejects(
      resolveSocketGroup('no-such-group-xyz', quiet),
      /group no-such-group-xyz not found \(--group\)/,
    );
  });

  it("words docker info's warnings as dockerd", () => {
    const bound = ['unix:///run/berth.sock', 'tcp://127.0.0.1:2375'];
    assert.deepEqual(apiWarnings(bound, undefined), [
      'WARNING: API is accessible on http://127.0.0.1:2375 without encryption.\n' +
        '         Access to the remote API is equivalent to root access on the host. Refer\n' +
        "         to the 'Docker daemon attack surface' section in the documentation for\n" +
        '         more information: https://docs.docker.com/go/attack-surface/',
    ]);
    const noVerify = { verify: false, certFile: 'c', keyFile: 'k' };
    assert.match(
      apiWarnings(bound, noVerify)[0] ?? '',
      /^WARNING: API is accessible on https:\/\/127\.0\.0\.1:2375 without TLS client verification\.\n/,
    );
    assert.deepEqual(apiWarnings(bound, { ...noVerify, verify: true, caFile: 'ca' }), []);
    assert.deepEqual(apiWarnings(['unix:///x'], undefined), []);
  });
});
