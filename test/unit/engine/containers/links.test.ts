import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateNetworkingConfig } from '../../../../src/engine/containers/core/validate.js';
import { hostsContent, updateHostsAddress } from '../../../../src/engine/containers/net/files.js';
import {
  linkEnv,
  linkHostNames,
  linkName,
  mergeLinkEnv,
  parseLink,
} from '../../../../src/engine/containers/net/links.js';
import { containerEnv } from '../../../../src/engine/runtime/oci/process-env.js';

describe('legacy links', () => {
  it("parses link strings as dockerd's ParseLink", () => {
    assert.deepEqual(parseLink('db:alias'), { name: 'db', alias: 'alias' });
    assert.deepEqual(parseLink('db'), { name: 'db', alias: 'db' });
    // the form inspect shows is accepted back
    assert.deepEqual(parseLink('/db:/web/alias'), { name: 'db', alias: 'alias' });
    assert.deepEqual(parseLink('db:'), { name: 'db', alias: '' });
    assert.throws(() => parseLink('a:b:c'), { message: 'bad format for links: a:b:c' });
    assert.throws(() => parseLink(''), { message: 'empty string specified for links' });
  });

  it('names links /parent/alias', () => {
    assert.equal(linkName('/web', 'db'), '/web/db');
    assert.equal(linkName('/web', ''), '/web');
  });

  it('gives the environment dockerd 20.10 gave for the same link (recorded)', () => {
    // docker run -d --name tgt -e FOO=bar -e HOME=/x --expose 80 --expose 81/udp --expose 8080-8082 busybox
    // docker run --name self --link tgt:al busybox env   (dockerd 20.10.24, target at 172.17.0.2)
    const recorded = [
      'AL_ENV_FOO=bar',
      'AL_NAME=/self/al',
      'AL_PORT=tcp://172.17.0.2:80',
      'AL_PORT_8080_TCP=tcp://172.17.0.2:8080',
      'AL_PORT_8080_TCP_ADDR=172.17.0.2',
      'AL_PORT_8080_TCP_END=tcp://172.17.0.2:8082',
      'AL_PORT_8080_TCP_PORT=8080',
      'AL_PORT_8080_TCP_PORT_END=8082',
      'AL_PORT_8080_TCP_PORT_START=8080',
      'AL_PORT_8080_TCP_PROTO=tcp',
      'AL_PORT_8080_TCP_START=tcp://172.17.0.2:8080',
      'AL_PORT_8081_TCP=tcp://172.17.0.2:8081',
      'AL_PORT_8081_TCP_ADDR=172.17.0.2',
      'AL_PORT_8081_TCP_PORT=8081',
      'AL_PORT_8081_TCP_PROTO=tcp',
      'AL_PORT_8082_TCP=tcp://172.17.0.2:8082',
      'AL_PORT_8082_TCP_ADDR=172.17.0.2',
      'AL_PORT_8082_TCP_PORT=8082',
      'AL_PORT_8082_TCP_PROTO=tcp',
      'AL_PORT_80_TCP=tcp://172.17.0.2:80',
      'AL_PORT_80_TCP_ADDR=172.17.0.2',
      'AL_PORT_80_TCP_PORT=80',
      'AL_PORT_80_TCP_PROTO=tcp',
      'AL_PORT_81_UDP=udp://172.17.0.2:81',
      'AL_PORT_81_UDP_ADDR=172.17.0.2',
      'AL_PORT_81_UDP_PORT=81',
      'AL_PORT_81_UDP_PROTO=udp',
    ];
    const env = linkEnv({
      name: '/self/al',
      childIp: '172.17.0.2',
      childEnv: ['PATH=/usr/bin:/bin', 'FOO=bar', 'HOME=/x', 'BARE'],
      exposedPorts: ['8082/tcp', '80/tcp', '8080/tcp', '81/udp', '8081/tcp'],
    });
    // the runtime keeps the last of duplicate names (runc's prepareEnv), as `env` then shows them
    const unique = [...new Map(env.map((e) => [e.slice(0, e.indexOf('=')), e])).values()].sort();
    assert.deepEqual(unique, recorded);
    assert.equal(env[0], 'AL_PORT=tcp://172.17.0.2:80');
  });

  it('names the variables after the alias (upper case, - as _), with no ports when none are exposed', () => {
    assert.deepEqual(linkEnv({ name: '/p/my-db', childIp: '10.0.0.2', childEnv: [], exposedPorts: [] }), [
      'MY_DB_NAME=/p/my-db',
    ]);
    // tcp before udp at the same port; both make a run with the next port
    const env = linkEnv({
      name: '/p/x',
      childIp: 'i',
      childEnv: [],
      exposedPorts: ['53/udp', '53/tcp', '54/tcp'],
    });
    assert.equal(env[0], 'X_PORT=tcp://i:53');
    assert.ok(env.includes('X_PORT_53_TCP_START=tcp://i:53'));
    assert.ok(env.includes('X_PORT_53_TCP_END=tcp://i:54'));
  });

  it("merges link variables under the container's own, in dockerd's order", () => {
    const merged = mergeLinkEnv(['A_NAME=/p/a', 'A_PORT=tcp://x:1'], ['A_PORT=mine', 'OWN=1', 'A_NAME']);
    assert.deepEqual(merged, ['A_PORT=mine', 'OWN=1']);
    // a bare name that is not a link variable still reaches the spec builder (it may unset HOSTNAME)
    assert.deepEqual(mergeLinkEnv(['A_NAME=/p/a'], ['HOSTNAME']), ['A_NAME=/p/a', 'HOSTNAME']);
    assert.deepEqual(containerEnv(mergeLinkEnv(['A_NAME=/p/a'], ['X=1']), 'h', true), [
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      'HOSTNAME=h',
      'TERM=xterm',
      'A_NAME=/p/a',
      'X=1',
    ]);
  });

  it('lists a link in /etc/hosts as alias, hostname, then name when it differs', () => {
    assert.equal(linkHostNames('al', '69f3f0ebe806', '/tgt'), 'al 69f3f0ebe806 tgt');
    assert.equal(linkHostNames('tgt', '69f3f0ebe806', '/tgt'), 'tgt 69f3f0ebe806');
  });
});

describe('/etc/hosts', () => {
  it('is what dockerd 20.10 wrote for a container with a link and an extra host (recorded)', () => {
    const text = hostsContent({
      extraHosts: ['foo:1.2.3.4'],
      links: [{ ip: '172.17.0.2', names: linkHostNames('tgt', '69f3f0ebe806', '/tgt') }],
      ip: '172.17.0.3',
      hostname: 'beae6fec8482',
    });
    assert.equal(
      text,
      [
        '127.0.0.1\tlocalhost',
        '::1\tlocalhost ip6-localhost ip6-loopback',
        'fe00::0\tip6-localnet',
        'ff00::0\tip6-mcastprefix',
        'ff02::1\tip6-allnodes',
        'ff02::2\tip6-allrouters',
        '1.2.3.4\tfoo',
        '172.17.0.2\ttgt 69f3f0ebe806',
        '172.17.0.3\tbeae6fec8482',
        '',
      ].join('\n'),
    );
  });

  it('names the own address with the FQDN and the bare name', () => {
    const last = (t: string) => t.trimEnd().split('\n').at(-1);
    assert.equal(
      last(hostsContent({ extraHosts: [], ip: '10.0.0.2', hostname: 'web', domainname: 'example.org' })),
      '10.0.0.2\tweb.example.org web',
    );
    assert.equal(last(hostsContent({ extraHosts: [], ip: '10.0.0.2', hostname: 'a.b' })), '10.0.0.2\ta.b a');
    assert.equal(last(hostsContent({ extraHosts: [], hostname: 'x' })), 'ff02::2\tip6-allrouters');
  });

  it("moves a linked container's lines to its new address (etchosts.Update)", () => {
    const before =
      '127.0.0.1\tlocalhost\n172.17.0.2\tdb 0123456789ab pg\n172.17.0.9\tdbx 1\n172.17.0.3\tme\n';
    assert.equal(
      updateHostsAddress(before, 'db', '172.17.0.7'),
      '127.0.0.1\tlocalhost\n172.17.0.7\tdb 0123456789ab pg\n172.17.0.9\tdbx 1\n172.17.0.3\tme\n',
    );
  });
});

describe('endpoint settings at create', () => {
  it('refuses a bad MAC address with 400 before the bridge plugin sees it', () => {
    validateNetworkingConfig({ EndpointsConfig: { bridge: { MacAddress: '02:42:ac:11:00:09' } } });
    validateNetworkingConfig({ EndpointsConfig: { default: { MacAddress: '02-42-AC-11-00-09' } } });
    assert.throws(
      () => validateNetworkingConfig({ EndpointsConfig: { bridge: { MacAddress: '02:42:zz:11:00:09' } } }),
      (err: Error & { kind?: string }) =>
        err.kind === 'InvalidParameter' && err.message === 'invalid MAC address: 02:42:zz:11:00:09',
    );
  });
});
