import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseArgs } from '../../../src/cli/args.js';
import {
  applyConfigFile,
  configFileChoice,
  DEFAULT_CONFIG_FILE,
  parseConfigFile,
  readConfigFile,
} from '../../../src/cli/config-file.js';
import {
  engineConfigFrom,
  engineFlags,
  loadEngineConfig,
  reloadedConfig,
} from '../../../src/cli/engine.command.js';

const parse = (argv: string[]) => parseArgs(argv, engineFlags);
const file = (json: unknown) => parseConfigFile(JSON.stringify(json), '/x/daemon.json', engineFlags);

describe('daemon.json: the engine configuration file', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-config-file-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("maps dockerd's keys and the flags' own names onto the flags", () => {
    const f = file({
      hosts: ['unix:///a.sock', 'tcp://127.0.0.1:0'],
      'data-root': '/d',
      'exec-root': '/e',
      'log-level': 'warn',
      'insecure-registries': ['10.0.0.0/8', 'reg:5000'],
      'registry-mirrors': ['http://m:5000'],
      'max-concurrent-downloads': 7,
      'max-concurrent-uploads': 2,
      experimental: true,
      bridge: 'br9',
      bip: '172.31.0.1/16',
      group: '',
      'default-runtime': 'crun',
      'copy-upload-limit': '1g',
      'headers-timeout': '5s',
      'max-connections-per-client': 9,
      'insecure-tcp-without-tls': false,
    });
    const config = engineConfigFrom(applyConfigFile(parse([]), f));
    assert.deepEqual(config.hosts, ['unix:///a.sock', 'tcp://127.0.0.1:0']);
    assert.equal(config.dataRoot, '/d');
    assert.equal(config.execRoot, '/e');
    assert.equal(config.logLevel, 'warn');
    assert.deepEqual(config.insecureRegistries, ['127.0.0.0/8', '10.0.0.0/8', 'reg:5000']);
    assert.deepEqual(config.registryMirrors, ['http://m:5000']);
    assert.equal(config.maxConcurrentDownloads, 7);
    assert.equal(config.maxConcurrentUploads, 2);
    assert.equal(config.experimental, true);
    assert.equal(config.bridge, 'br9');
    assert.equal(config.bip, '172.31.0.1/16');
    assert.equal(config.socketGroup, '');
    assert.equal(config.runtime, 'crun');
    assert.equal(config.copyUploadLimit, 1024 ** 3);
    assert.equal(config.limits.headersTimeoutMs, 5000);
    assert.equal(config.limits.maxConnectionsPerClient, 9);
    // the flags' own names work too; "debug": true is the debug level
    const own = engineConfigFrom(
      applyConfigFile(parse([]), file({ host: ['unix:///b.sock'], runtime: 'crun' })),
    );
    assert.deepEqual(own.hosts, ['unix:///b.sock']);
    assert.equal(own.runtime, 'crun');
    assert.equal(engineConfigFrom(applyConfigFile(parse([]), file({ debug: true }))).logLevel, 'debug');
    // debug is an option of its own (dockerd's -D): no conflict with --log-level, and it wins
    assert.equal(
      engineConfigFrom(applyConfigFile(parse(['--log-level', 'warn']), file({ debug: true }))).logLevel,
      'debug',
    );
    assert.equal(
      engineConfigFrom(applyConfigFile(parse(['--log-level', 'warn']), file({ debug: false }))).logLevel,
      'warn',
    );
    assert.throws(
      () => file({ debug: 1 }),
      /cannot unmarshal number into Go struct field Config.debug of type bool$/,
    );
    // TLS keys as dockerd's
    const tls = engineConfigFrom(
      applyConfigFile(
        parse([]),
        file({ tlsverify: true, tlscacert: '/c/ca', tlscert: '/c/c', tlskey: '/c/k' }),
      ),
    );
    assert.deepEqual(tls.tls, { verify: true, caFile: '/c/ca', certFile: '/c/c', keyFile: '/c/k' });
  });

  it('refuses unknown keys, keys given as flags too, and mistyped values, in dockerd words', () => {
    assert.throws(
      () => file({ foo: 1, 'log-level': 'info', bar: true }),
      /^Error: unable to configure the engine with file \/x\/daemon.json: the following directives don't match any configuration option: foo, bar$/,
    );
    assert.throws(() => file({ help: true }), /don't match any configuration option: help/);
    const f = file({
      hosts: ['unix:///x.sock'],
      'insecure-registries': ['a:1'],
      'log-level': 'debug',
      'max-concurrent-downloads': 1000000,
    });
    assert.throws(
      () =>
        applyConfigFile(
          parse([
            '-H',
            'unix:///y.sock',
            '--log-level',
            'info',
            '--insecure-registry',
            'b:2',
            '--max-concurrent-downloads',
            '4',
          ]),
          f,
        ),
      {
        message:
          'unable to configure the engine with file /x/daemon.json: the following directives are specified both as a flag and in the configuration file: hosts: (from flag: [unix:///y.sock], from file: [unix:///x.sock]), insecure-registries: (from flag: [b:2], from file: [a:1]), log-level: (from flag: info, from file: debug), max-concurrent-downloads: (from flag: 4, from file: 1e+06)',
      },
    );
    // flags the file does not set are fine together with it
    assert.equal(engineConfigFrom(applyConfigFile(parse(['--bridge', 'b1']), f)).bridge, 'b1');
    // wrong types in dockerd 20.10's (Go's) words
    assert.throws(() => file({ hosts: 'unix:///x' }), {
      message:
        'unable to configure the engine with file /x/daemon.json: json: cannot unmarshal string into Go struct field Config.hosts of type []string',
    });
    assert.throws(
      () => file({ experimental: 'yes' }),
      /json: cannot unmarshal string into Go struct field Config.experimental of type bool$/,
    );
    assert.throws(
      () => file({ 'log-level': 3 }),
      /json: cannot unmarshal number into Go struct field Config.log-level of type string$/,
    );
    assert.throws(
      () => file({ 'max-concurrent-downloads': '3' }),
      /json: cannot unmarshal string into Go struct field Config.max-concurrent-downloads of type int$/,
    );
    assert.throws(
      () => file({ bip: true }),
      /cannot unmarshal bool into Go struct field Config.bip of type string$/,
    );
    assert.throws(
      () => file({ hosts: [1] }),
      /cannot unmarshal number into Go struct field Config.hosts of type string$/,
    );
    // berth's own options take a number too; a null sets nothing
    assert.equal(file({ 'copy-upload-limit': 1024 }).values.get('copy-upload-limit'), '1024');
    assert.equal(file({ 'log-level': null }).values.has('log-level'), false);
    assert.throws(() => file({ hosts: [], host: [] }), /"hosts" and "host" are the same option/);
    assert.throws(() => parseConfigFile('{"a":', '/p', engineFlags), /with file \/p: invalid JSON/);
    assert.throws(
      () => parseConfigFile('[1]', '/p', engineFlags),
      /json: cannot unmarshal array into Go value of type map\[string\]interface \{\}$/,
    );
    // the flags' own checks apply to the file's values
    assert.throws(
      () => engineConfigFrom(applyConfigFile(parse([]), file({ 'registry-mirrors': ['ftp://m'] }))),
      /invalid mirror: unsupported scheme "ftp" in "ftp:\/\/m"/,
    );
    assert.throws(
      () => engineConfigFrom(applyConfigFile(parse([]), file({ 'insecure-registries': ['ftp://r:1'] }))),
      /insecure registry ftp:\/\/r:1 should not contain ':\/\/'/,
    );
    // dockerd 20.10 drops an http:// or https:// in front (with a warning)
    assert.deepEqual(
      engineConfigFrom(applyConfigFile(parse([]), file({ 'insecure-registries': ['http://r:1'] })))
        .insecureRegistries,
      ['127.0.0.0/8', 'r:1'],
    );
    assert.throws(
      () => engineConfigFrom(applyConfigFile(parse([]), file({ 'default-runtime': 'kata' }))),
      /unknown runtime/,
    );
  });

  it('reads the default file when present, and an explicit one that must exist', async () => {
    assert.deepEqual(configFileChoice(parse([])), { path: DEFAULT_CONFIG_FILE, explicit: false });
    assert.deepEqual(configFileChoice(parse(['--config-file', '/c.json'])), {
      path: '/c.json',
      explicit: true,
    });
    const missing = join(dir, 'missing.json');
    assert.equal(await readConfigFile(missing, false, engineFlags), undefined);
    await assert.rejects(readConfigFile(missing, true, engineFlags), {
      message: `unable to configure the engine with file ${missing}: open ${missing}: no such file or directory`,
    });
    await assert.rejects(loadEngineConfig(parse(['--config-file', missing])), /no such file or directory/);
    const path = join(dir, 'daemon.json');
    await writeFile(path, JSON.stringify({ 'log-level': 'error', 'registry-mirrors': ['https://m'] }));
    const config = await loadEngineConfig(parse(['--config-file', path, '--data-root', '/r']));
    assert.equal(config.logLevel, 'error');
    assert.equal(config.dataRoot, '/r');
    assert.deepEqual(config.registryMirrors, ['https://m']);
  });

  it('reloads only the reloadable options the file sets', async () => {
    const path = join(dir, 'reload.json');
    await writeFile(
      path,
      JSON.stringify({
        'log-level': 'debug',
        'insecure-registries': ['r:1'],
        'max-concurrent-uploads': 9,
        bridge: 'ignored-on-reload',
      }),
    );
    const parts = await reloadedConfig(parse(['--config-file', path]));
    assert.deepEqual(parts, {
      logLevel: 'debug',
      insecureRegistries: ['127.0.0.0/8', 'r:1'],
      maxConcurrentUploads: 9,
    });
    await writeFile(path, '{"debug": false}');
    assert.deepEqual(await reloadedConfig(parse(['--config-file', path, '--log-level', 'warn'])), {
      logLevel: 'warn',
    });
    await writeFile(path, '{"nope": 1}');
    await assert.rejects(
      reloadedConfig(parse(['--config-file', path])),
      /don't match any configuration option: nope/,
    );
  });
});
