import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  addOwnHostsAddress,
  dnsClientOptions,
  hostsContent,
  removeOwnHostsAddress,
  resolvConfContent,
  writeContainerFiles,
} from '../../../../src/engine/containers/net/files.js';

/** The files of a container on a user-defined network, as dockerd 20.10 writes them (seen on this machine). */
describe('resolv.conf and hosts with the engine DNS', () => {
  const host = 'nameserver 10.255.255.53\n';

  it('names the responder only, with ndots:0, on a user-defined network', () => {
    assert.equal(
      resolvConfContent(host, {}, false, '172.20.0.1'),
      'nameserver 172.20.0.1\noptions ndots:0\n',
    );
    assert.equal(
      resolvConfContent(
        'nameserver 10.0.0.2\nnameserver fd00::53\nsearch corp.example\noptions edns0\nsortlist 10.0.0.0\n',
        {},
        false,
        '172.20.0.1',
      ),
      'search corp.example\nnameserver 172.20.0.1\nnameserver fd00::53\noptions edns0 ndots:0\n',
    );
  });

  it('keeps Dns as forwarding servers, lists its IPv6 ones, honours DnsSearch and DnsOptions', () => {
    const hc = {
      Dns: ['10.1.1.1', 'fd00::53'],
      DnsSearch: ['a.example'],
      DnsOptions: ['ndots:3', 'timeout:2'],
    };
    assert.equal(
      resolvConfContent(host, hc, false, '172.20.0.1'),
      'search a.example\nnameserver 172.20.0.1\nnameserver fd00::53\noptions ndots:3 timeout:2\n',
    );
    assert.deepEqual(dnsClientOptions(hc), { upstreams: ['10.1.1.1'], ndotsSet: true });
    assert.deepEqual(dnsClientOptions({}), {});
    assert.deepEqual(dnsClientOptions({ Dns: ['fd00::53'], DnsOptions: ['ndots:0'] }), {});
    assert.equal(
      resolvConfContent(host, { DnsOptions: ['timeout:2'], DnsSearch: ['.'] }, false, '172.20.0.1'),
      'nameserver 172.20.0.1\noptions timeout:2 ndots:0\n',
    );
    assert.equal(
      resolvConfContent(host, { DnsSearch: ['a.example', '.'] }, false, '172.20.0.1'),
      'search a.example .\nnameserver 172.20.0.1\noptions ndots:0\n',
    );
    assert.equal(
      resolvConfContent(host, { DnsOptions: ['ndots:0'] }, false, '172.20.0.1'),
      'nameserver 172.20.0.1\noptions ndots:0\n',
    );
    assert.equal(
      resolvConfContent(host, { DnsOptions: ['ndots:1', 'ndots:2'] }, false, '172.20.0.1'),
      'nameserver 172.20.0.1\noptions ndots:1 ndots:2\n',
    );
    // a malformed ndots: dockerd leaves the file without its DNS
    assert.equal(
      resolvConfContent(host, { DnsOptions: ['ndots:x'] }, false, '172.20.0.1'),
      'nameserver 10.255.255.53\noptions ndots:x\n',
    );
  });

  it('writes the default bridge as before: the host servers or Dns', () => {
    assert.equal(
      resolvConfContent(host, { DnsOptions: ['timeout:2'] }, false),
      'nameserver 10.255.255.53\noptions timeout:2\n',
    );
    assert.equal(
      resolvConfContent(host, { Dns: ['10.1.1.1'], DnsSearch: ['a.example'] }, false),
      'search a.example\nnameserver 10.1.1.1\n',
    );
  });

  it('writes hosts with ExtraHosts (host-gateway), the hostname and domain name', () => {
    assert.equal(
      hostsContent({
        extraHosts: ['gw:host-gateway', 'x:10.9.9.9'],
        ip: '172.20.0.2',
        hostname: 'box',
        domainname: 'dom.example',
        hostGateway: '172.17.0.1',
      }),
      '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n172.17.0.1\tgw\n10.9.9.9\tx\n172.20.0.2\tbox.dom.example box\n',
    );
    assert.match(
      hostsContent({ extraHosts: [], ip: '172.20.0.2', hostname: 'h.x.y' }),
      /172\.20\.0\.2\th\.x\.y h\n$/,
    );
    // neither --host-gateway-ip nor a default bridge: dockerd's error
    assert.throws(
      () => hostsContent({ extraHosts: ['gw:host-gateway'], hostname: 'h' }),
      /unable to derive the IP value for host-gateway/,
    );
  });

  it('adds and removes the line of a network joined or left while running', () => {
    const first = hostsContent({ extraHosts: ['x:1.2.3.4'], ip: '172.20.0.2', hostname: 'box' });
    const both = addOwnHostsAddress(first, '172.22.0.3', 'box');
    assert.ok(both.endsWith('1.2.3.4\tx\n172.20.0.2\tbox\n172.22.0.3\tbox\n'), both);
    assert.equal(addOwnHostsAddress(both, '172.22.0.3', 'box'), both);
    assert.equal(removeOwnHostsAddress(both, '172.20.0.2').endsWith('1.2.3.4\tx\n172.22.0.3\tbox\n'), true);
    assert.ok(addOwnHostsAddress(first, '10.0.0.5', 'h', 'd.example').endsWith('10.0.0.5\th.d.example h\n'));
  });
});

describe("writing a container's network files", () => {
  const write = (dir: string, hostname: string, fresh: boolean) =>
    writeContainerFiles({
      hostsPath: join(dir, 'hosts'),
      hostnamePath: join(dir, 'hostname'),
      resolvConfPath: join(dir, 'resolv.conf'),
      hostname,
      hostConfig: { Dns: ['10.0.0.53'] },
      hostNetwork: false,
      fresh,
    });

  it('makes them at a first start, and replaces them (a new file each) at later ones', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-netfiles-'));
    try {
      await write(dir, 'first', true);
      assert.equal(await readFile(join(dir, 'hostname'), 'utf8'), 'first\n');
      assert.equal(await readFile(join(dir, 'resolv.conf'), 'utf8'), 'nameserver 10.0.0.53\n');
      assert.match(await readFile(join(dir, 'hosts'), 'utf8'), /^127.0.0.1\tlocalhost\n/);
      assert.equal((await stat(join(dir, 'hosts'))).mode & 0o777, 0o644 & ~process.umask());
      // a first start that failed after writing them: still "fresh", the files are replaced
      await writeFile(join(dir, 'hostname'), 'torn');
      const before = (await stat(join(dir, 'hostname'))).ino;
      await write(dir, 'second', true);
      assert.equal(await readFile(join(dir, 'hostname'), 'utf8'), 'second\n');
      assert.notEqual((await stat(join(dir, 'hostname'))).ino, before, 'renamed over, not rewritten');
      await write(dir, 'third', false);
      assert.equal(await readFile(join(dir, 'hostname'), 'utf8'), 'third\n');
      assert.deepEqual((await readdir(dir)).sort(), ['hostname', 'hosts', 'resolv.conf']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
