import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseArgs, parseDuration, UsageError } from '../../../src/cli/args.js';
import { engineConfigFrom, engineFlags, engineTlsFrom } from '../../../src/cli/engine.command.js';
import { defaultEngineLimits } from '../../../src/engine/config.js';

const parse = (argv: string[]) => parseArgs(argv, engineFlags);

describe('engine flags: TLS, socket group, connection caps', () => {
  it('reads the TLS flags as dockerd 20.10: --tlsverify implies --tls, --tls alone verifies no client', () => {
    const env = { DOCKER_CERT_PATH: '/certs' };
    assert.equal(engineTlsFrom(parse([]), env), undefined);
    assert.deepEqual(engineTlsFrom(parse(['--tlsverify']), env), {
      verify: true,
      caFile: '/certs/ca.pem',
      certFile: '/certs/cert.pem',
      keyFile: '/certs/key.pem',
    });
    assert.deepEqual(engineTlsFrom(parse(['--tls', '--tlscert', '/a/c.pem', '--tlskey=/a/k.pem']), env), {
      verify: false,
      certFile: '/a/c.pem',
      keyFile: '/a/k.pem',
    });
    // --tlsverify=false given at all still turns TLS on, without verification
    assert.equal(engineTlsFrom(parse(['--tlsverify=false']), env)?.verify, false);
    // DOCKER_TLS_VERIFY turns verification on, as for dockerd
    assert.equal(engineTlsFrom(parse([]), { ...env, DOCKER_TLS_VERIFY: '1' })?.verify, true);
    // without DOCKER_CERT_PATH: $DOCKER_CONFIG, else ~/.docker
    assert.equal(engineTlsFrom(parse(['--tlsverify']), { DOCKER_CONFIG: '/cfg' })?.caFile, '/cfg/ca.pem');
    assert.throws(
      () => engineTlsFrom(parse(['--tlscert', '/x']), env),
      /--tlscert needs --tls or --tlsverify/,
    );
  });

  it('takes -H, -G and --insecure-tcp-without-tls', () => {
    const c = engineConfigFrom(
      parse(['-H', 'tcp://0.0.0.0:2375', '-G', 'staff', '--insecure-tcp-without-tls']),
    );
    assert.deepEqual(c.hosts, ['tcp://0.0.0.0:2375']);
    assert.equal(c.socketGroup, 'staff');
    assert.equal(c.insecureTcpWithoutTls, true);
    const d = engineConfigFrom(parse([]));
    assert.equal(d.socketGroup, 'docker');
    assert.equal(d.insecureTcpWithoutTls, false);
    assert.equal(engineConfigFrom(parse(['--group='])).socketGroup, '');
  });

  it('reads the connection caps, with sizes and durations', () => {
    assert.deepEqual(engineConfigFrom(parse([])).limits, defaultEngineLimits);
    const c = engineConfigFrom(
      parse([
        '--max-header-size',
        '64k',
        '--max-connections-per-client=8',
        '--max-local-connections',
        '0',
        '--headers-timeout',
        '500ms',
        '--body-idle-timeout',
        '2m',
        '--keep-alive-timeout',
        '5',
      ]),
    );
    assert.deepEqual(c.limits, {
      maxHeaderBytes: 65536,
      maxConnectionsPerClient: 8,
      maxLocalConnections: 0,
      headersTimeoutMs: 500,
      bodyIdleTimeoutMs: 120_000,
      keepAliveTimeoutMs: 5000,
    });
    assert.throws(() => engineConfigFrom(parse(['--max-header-size', '100'])), /at least 1k/);
    assert.throws(() => engineConfigFrom(parse(['--max-connections-per-client', 'many'])), UsageError);
    assert.throws(() => engineConfigFrom(parse(['--headers-timeout', 'soon'])), /invalid duration/);
    assert.equal(parseDuration('1.5s'), 1500);
  });
});
