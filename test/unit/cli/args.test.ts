import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseArgs, UsageError, usage } from '../../../src/cli/args.js';
import { engineConfigFrom, engineFlags } from '../../../src/cli/engine.command.js';

describe('engine flags', () => {
  it('takes --bridge, its short form -b, and --bip', () => {
    assert.equal(engineConfigFrom(parseArgs([], engineFlags)).bridge, 'berth0');
    assert.equal(engineConfigFrom(parseArgs([], engineFlags)).bip, undefined);
    const c = engineConfigFrom(parseArgs(['-b', 'br9', '--bip', '10.1.0.1/24'], engineFlags));
    assert.deepEqual([c.bridge, c.bip], ['br9', '10.1.0.1/24']);
    assert.equal(engineConfigFrom(parseArgs(['-b=none'], engineFlags)).bridge, 'none');
    assert.equal(engineConfigFrom(parseArgs(['--bridge=br7'], engineFlags)).bridge, 'br7');
  });

  it('takes --host-gateway-ip as an address', () => {
    assert.equal(engineConfigFrom(parseArgs([], engineFlags)).hostGatewayIp, undefined);
    assert.equal(
      engineConfigFrom(parseArgs(['--host-gateway-ip', '10.1.2.3'], engineFlags)).hostGatewayIp,
      '10.1.2.3',
    );
    assert.equal(
      engineConfigFrom(parseArgs(['--host-gateway-ip=fd00::1'], engineFlags)).hostGatewayIp,
      'fd00::1',
    );
    assert.throws(() => engineConfigFrom(parseArgs(['--host-gateway-ip', 'gw'], engineFlags)), UsageError);
  });

  it('takes --copy-upload-limit as a size (default 10 GiB), refusing what is not one', () => {
    assert.equal(engineConfigFrom(parseArgs([], engineFlags)).copyUploadLimit, 10 * 1024 ** 3);
    const c = engineConfigFrom(parseArgs(['--copy-upload-limit', '512m'], engineFlags));
    assert.equal(c.copyUploadLimit, 512 * 1024 ** 2);
    assert.equal(
      engineConfigFrom(parseArgs(['--copy-upload-limit=4096'], engineFlags)).copyUploadLimit,
      4096,
    );
    assert.throws(
      () => engineConfigFrom(parseArgs(['--copy-upload-limit', 'lots'], engineFlags)),
      UsageError,
    );
    assert.throws(() => engineConfigFrom(parseArgs(['--copy-upload-limit', '0'], engineFlags)), UsageError);
  });

  it('refuses unknown short flags and lists the short form in the help', () => {
    assert.throws(() => parseArgs(['-x'], engineFlags), UsageError);
    assert.throws(() => parseArgs(['-b'], engineFlags), /--bridge needs a value/);
    assert.match(usage('engine', engineFlags), /-b, --bridge value/);
  });
});
