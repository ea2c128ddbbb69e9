import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  applyEnv,
  ConfigError,
  configFromEnv,
  parseAddr,
  parseConfig,
  parseDuration,
} from '../../../src/registry/config.js';
import { Lru } from '../../../src/registry/lru.js';
import { signSchema1, verifySchema1 } from '../../../src/registry/manifests/schema1.js';
import { parseManifest } from '../../../src/registry/manifests/validate.js';

describe('config', () => {
  it('defaults', () => {
    const c = parseConfig('');
    assert.equal(c.http.addr, '127.0.0.1:5000');
    assert.equal(c.storage.filesystem.rootdirectory, '/var/lib/berth/registry');
    assert.equal(c.storage.delete.enabled, false);
    assert.equal(c.storage.maintenance.uploadpurging.enabled, true);
    assert.equal(c.storage.maintenance.uploadpurging.ageMs, 168 * 3600_000);
    assert.equal(c.storage.maintenance.readonly.enabled, false);
    assert.equal(c.berth.pagination.maxentries, 1000);
    assert.equal(c.log.accesslog.disabled, false);
  });
  it("the reference registry's schema, with auth and berth sections", () => {
    const c = parseConfig(`
version: 0.1
log:
  level: debug
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: /srv/reg
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
      age: 2h30m
      interval: 10m
      dryrun: true
    readonly:
      enabled: true
http:
  addr: :5001
  relativeurls: true
  tls:
    certificate: /c.pem
    key: /k.pem
auth:
  htpasswd:
    realm: basic
    path: /etc/htpasswd
  token:
    realm: https://auth/token
    service: reg
    issuer: iss
    rootcertbundle: /bundle.pem
berth:
  deletetags: true
  pagination:
    maxentries: 50
  tokenserver:
    path: /auth/token
    expiration: 600
  ratelimit:
    requestspersecond: 5
    burst: 10
    by: user
`);
    assert.equal(c.log.level, 'debug');
    assert.equal(c.log.accesslog.disabled, true);
    assert.equal(c.storage.filesystem.rootdirectory, '/srv/reg');
    assert.equal(c.storage.delete.enabled, true);
    assert.deepEqual(c.storage.maintenance.uploadpurging, {
      enabled: false,
      ageMs: 9_000_000,
      intervalMs: 600_000,
      dryrun: true,
    });
    assert.equal(c.storage.maintenance.readonly.enabled, true);
    assert.equal(c.http.addr, ':5001');
    assert.equal(c.http.relativeurls, true);
    assert.deepEqual(c.http.tls, { certificate: '/c.pem', key: '/k.pem' });
    assert.deepEqual(c.auth.htpasswd, { realm: 'basic', path: '/etc/htpasswd' });
    assert.deepEqual(c.auth.token, {
      realm: 'https://auth/token',
      service: 'reg',
      issuer: 'iss',
      rootcertbundle: '/bundle.pem',
    });
    assert.equal(c.berth.deletetags, true);
    assert.equal(c.berth.pagination.maxentries, 50);
    assert.equal(c.berth.tokenserver?.expiration, 600);
    assert.equal(c.berth.tokenserver?.enabled, true);
    assert.deepEqual(c.berth.ratelimit, { enabled: true, requestspersecond: 5, burst: 10, by: 'user' });
  });
  it('JSON works and errors are ConfigErrors', () => {
    assert.equal(parseConfig('{"http":{"addr":"127.0.0.1:9"}}').http.addr, '127.0.0.1:9');
    assert.throws(() => parseConfig('storage: {s3: {}}'), ConfigError);
    assert.throws(() => parseConfig('storage: {delete: {enabled: maybe}}'), ConfigError);
    assert.throws(() => parseConfig('http: {tls: {certificate: /x}}'), ConfigError);
    assert.throws(() => parseConfig(': : :'), ConfigError);
  });
  it('REGISTRY_* environment overrides, as the reference registry', () => {
    const c = configFromEnv({
      REGISTRY_HTTP_ADDR: '127.0.0.1:7000',
      REGISTRY_STORAGE_DELETE_ENABLED: 'true',
      REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY: '/env/root',
      REGISTRY_LOG_LEVEL: 'warn',
      PATH: '/usr/bin',
    });
    assert.equal(c.http.addr, '127.0.0.1:7000');
    assert.equal(c.storage.delete.enabled, true);
    assert.equal(c.storage.filesystem.rootdirectory, '/env/root');
    assert.equal(c.log.level, 'warn');
    const doc = { http: { addr: ':1' } };
    assert.deepEqual(applyEnv(doc, { REGISTRY_HTTP_ADDR: ':2' }), { http: { addr: ':2' } });
    assert.deepEqual(doc, { http: { addr: ':1' } });
  });
  it('berth.limits: defaults, the file, REGISTRY_BERTH_LIMITS_* and bad values', () => {
    assert.deepEqual(parseConfig('{}').berth.limits, {
      manifestsize: 4 << 20,
      blobsize: 0,
      formsize: 64 << 10,
      uploadsperclient: 32,
    });
    const c = parseConfig('berth: {limits: {manifestsize: 1000, blobsize: 1073741824}}');
    assert.equal(c.berth.limits.manifestsize, 1000);
    assert.equal(c.berth.limits.blobsize, 1 << 30);
    assert.equal(c.berth.limits.uploadsperclient, 32);
    const env = configFromEnv({
      REGISTRY_BERTH_LIMITS_UPLOADSPERCLIENT: '4',
      REGISTRY_BERTH_LIMITS_FORMSIZE: '512',
    });
    assert.equal(env.berth.limits.uploadsperclient, 4);
    assert.equal(env.berth.limits.formsize, 512);
    for (const bad of [
      '{manifestsize: -1}',
      '{blobsize: 1.5}',
      '{uploadsperclient: lots}',
      '{manifestsize: 0}',
      '[]',
    ]) {
      assert.throws(() => parseConfig(`berth: {limits: ${bad}}`), ConfigError, bad);
    }
  });
  it('durations and addresses', () => {
    assert.equal(parseDuration('1h30m', 'x', 0), 5_400_000);
    assert.equal(parseDuration('500ms', 'x', 0), 500);
    assert.equal(parseDuration(undefined, 'x', 7), 7);
    assert.throws(() => parseDuration('forever', 'x', 0), ConfigError);
    assert.deepEqual(parseAddr(':5000'), { host: '0.0.0.0', port: 5000 });
    assert.deepEqual(parseAddr('[::1]:80'), { host: '::1', port: 80 });
    assert.throws(() => parseAddr('nope'), ConfigError);
  });
});

describe('schema 1 signatures', () => {
  const payload = JSON.stringify(
    { schemaVersion: 1, name: 'a', tag: 't', fsLayers: [], history: [] },
    null,
    3,
  );
  it('sign then verify gives back the payload (EC and RSA)', () => {
    for (const kp of [
      generateKeyPairSync('ec', { namedCurve: 'P-256' }),
      generateKeyPairSync('rsa', { modulusLength: 2048 }),
    ]) {
      const signed = signSchema1(payload, kp.privateKey);
      assert.match(signed.toString(), /"signatures": \[/);
      assert.equal(verifySchema1(signed).toString(), payload);
    }
  });
  it('detects tampering', () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const signed = signSchema1(payload, privateKey).toString().replace('"tag": "t"', '"tag": "u"');
    assert.throws(() => verifySchema1(Buffer.from(signed)));
  });
});

describe('manifest validation', () => {
  it('requires well-formed descriptors', () => {
    const m = (config: unknown) =>
      parseManifest(
        'application/vnd.oci.image.manifest.v1+json',
        Buffer.from(JSON.stringify({ schemaVersion: 2, config, layers: [] })),
      );
    assert.throws(() => m({ mediaType: 'x', digest: 'sha256:bad', size: 1 }));
    assert.throws(() => m({ mediaType: 'x', digest: `sha256:${'a'.repeat(64)}`, size: -1 }));
    const ok = m({ mediaType: 'x', digest: `sha256:${'a'.repeat(64)}`, size: 1 });
    assert.deepEqual(ok.blobs, [`sha256:${'a'.repeat(64)}`]);
    assert.equal(ok.artifactType, 'x');
  });
  it('skips foreign layers with urls', () => {
    const info = parseManifest(
      'application/vnd.docker.distribution.manifest.v2+json',
      Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
          config: { mediaType: 'c', digest: `sha256:${'a'.repeat(64)}`, size: 1 },
          layers: [
            {
              mediaType: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
              digest: `sha256:${'b'.repeat(64)}`,
              size: 1,
              urls: ['https://example.com/layer'],
            },
          ],
        }),
      ),
    );
    assert.deepEqual(info.blobs, [`sha256:${'a'.repeat(64)}`]);
  });
});

describe('lru', () => {
  it('evicts by count and weight', () => {
    const l = new Lru<string, number>(2, 10);
    l.set('a', 1);
    l.set('b', 2);
    l.get('a');
    l.set('c', 3);
    assert.equal(l.get('b'), undefined);
    assert.equal(l.get('a'), 1);
    l.set('big', 4, 11);
    assert.equal(l.get('big'), undefined);
    l.set('w', 5, 9);
    assert.equal(l.size, 2);
    assert.equal(l.get('c'), undefined);
    assert.equal(l.get('a'), 1);
  });
});
