import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import { forwardQuery, parseUpstream } from '../../../../src/engine/network/dns/dns.forward.js';
import { DnsRecords, ptrAddress, ptrName } from '../../../../src/engine/network/dns/dns.records.js';
import {
  buildResponse,
  CLASS_IN,
  ipv4Data,
  ipv6Data,
  parseQuery,
  RCODE,
  readName,
  TYPE,
  WireError,
  writeName,
} from '../../../../src/engine/network/dns/dns.wire.js';
import { EmbeddedDns } from '../../../../src/engine/network/dns/embedded-dns.js';
import {
  onlyResolvedStub,
  parseResolvConf,
  usableNameservers,
} from '../../../../src/engine/network/dns/host-resolvers.js';
import { nodeScript, runCommand } from '../../../helpers/process.js';
import { FakeUpstream, ipv4Of, query, readReply, tcpAsk, udpAsk } from './dns-client.js';

const log = new Logger('error');

describe('DNS wire format', () => {
  it('writes and reads names, escaping what is not a plain label', () => {
    const wire = writeName('web.mynet.');
    assert.deepEqual([...wire], [3, 119, 101, 98, 5, 109, 121, 110, 101, 116, 0]);
    assert.deepEqual(readName(wire, 0), { name: 'web.mynet', next: wire.length });
    assert.deepEqual(readName(Buffer.from([1, 0x2e, 0]), 0).name, '\\046');
    assert.deepEqual(writeName('\\046'), Buffer.from([1, 0x2e, 0]));
    assert.deepEqual(readName(Buffer.from([0]), 0), { name: '', next: 1 });
  });

  it('follows compression pointers backwards only, and never loops', () => {
    // "a" at 0, then "b" + pointer to 0 at 3
    const buf = Buffer.from([1, 97, 0, 1, 98, 0xc0, 0]);
    assert.deepEqual(readName(buf, 3), { name: 'b.a', next: 7 });
    assert.throws(() => readName(Buffer.from([0xc0, 0]), 0), WireError);
    assert.throws(() => readName(Buffer.from([1, 97, 0xc0, 0]), 0), WireError);
    assert.throws(() => readName(Buffer.from([5, 97]), 0), WireError);
    assert.throws(() => readName(Buffer.from([0x40]), 0), WireError);
    const long = Buffer.concat([...Array(5)].map(() => Buffer.from([63, ...Buffer.alloc(63, 97)])));
    assert.throws(() => readName(Buffer.concat([long, Buffer.from([0])]), 0), /255/);
  });

  it('reads a query with EDNS and sizes its answer', () => {
    const q = parseQuery(query('web', TYPE.A, { edns: 1232 }));
    assert.equal(q.question.name, 'web');
    assert.equal(q.udpLimit, 1232);
    assert.equal(q.edns, true);
    assert.equal(parseQuery(query('web', TYPE.A)).udpLimit, 512);
    const answers = [...Array(40)].map((_, i) => ({
      name: 'web',
      type: TYPE.A,
      class: CLASS_IN,
      ttl: 600,
      data: ipv4Data(`10.0.0.${i}`),
    }));
    const r = readReply(buildResponse(parseQuery(query('web', TYPE.A)), { rcode: 0, answers, limit: 512 }));
    assert.equal(r.header.truncated, true);
    assert.ok(r.raw.length <= 512);
    assert.ok(r.answers.length > 0 && r.answers.length < 40);
  });

  it('writes IPv6 addresses in 16 octets', () => {
    assert.equal(ipv6Data('fd00::1').toString('hex'), 'fd000000000000000000000000000001');
    assert.equal(ipv6Data('::ffff:1.2.3.4').toString('hex'), '00000000000000000000ffff01020304');
    assert.equal(ipv6Data('::').toString('hex'), '0'.repeat(32));
  });
});

describe('DNS records', () => {
  const r = new DnsRecords();
  r.describe('A', { domain: 'front', subnets: ['172.30.0.0/24'] });
  r.describe('B', { domain: 'back', subnets: ['172.31.0.0/24', 'fd00:b::/64'] });
  r.add('A', 'e1', { names: ['Web', 'www', 'abcdef123456'], ipv4: '172.30.0.2', sandbox: 's1' });
  r.add('A', 'e2', { names: ['client'], ipv4: '172.30.0.3', sandbox: 's2' });
  r.add('B', 'e3', { names: ['web', 'api'], ipv4: '172.31.0.2', ipv6: 'fd00:b::2', sandbox: 's1' });
  r.add('B', 'e4', { names: ['db'], ipv4: '172.31.0.3', sandbox: 's3' });

  it('resolves names, aliases and short IDs of the network, any case, and <name>.<network>', () => {
    const scope = r.scope('A', '172.30.0.3');
    assert.deepEqual(scope, ['A']);
    assert.deepEqual(r.lookup(scope, 'web', 4).addresses, ['172.30.0.2']);
    assert.deepEqual(r.lookup(scope, 'WWW.', 4).addresses, ['172.30.0.2']);
    assert.deepEqual(r.lookup(scope, 'abcdef123456', 4).addresses, ['172.30.0.2']);
    assert.deepEqual(r.lookup(scope, 'web.front', 4).addresses, ['172.30.0.2']);
    assert.deepEqual(r.lookup(scope, 'web', 6), { found: true, addresses: [] });
    assert.equal(r.lookup(scope, 'db', 4).found, false);
    assert.equal(r.lookup(scope, 'web.back', 4).found, false);
    // dockerd: the network's name is matched as it is written
    assert.equal(r.lookup(scope, 'web.FRONT', 4).found, false);
    assert.deepEqual(r.lookup(scope, 'WEB.front.', 4).addresses, ['172.30.0.2']);
  });

  it("keeps a network's names from clients of other networks", () => {
    assert.deepEqual(r.scope('B', '172.30.0.3'), []);
    assert.deepEqual(r.scope('A', '172.31.0.3'), []);
    assert.deepEqual(r.scope('B', 'fd00:b::9'), ['B']);
  });

  it("gives a container on two networks the names of both, its receiving network's first", () => {
    const scope = r.scope('A', '172.30.0.2');
    assert.deepEqual(scope, ['A', 'B']);
    assert.deepEqual(r.lookup(scope, 'db', 4).addresses, ['172.31.0.3']);
    assert.deepEqual(r.lookup(scope, 'web', 4).addresses, ['172.30.0.2']);
    assert.deepEqual(r.lookup(scope, 'web.back', 4).addresses, ['172.31.0.2']);
  });

  it('resolves a legacy link alias for the linking container only, by its target name at query time', () => {
    const l = new DnsRecords();
    l.describe('N', { domain: 'net', subnets: ['10.1.0.0/24'] });
    l.add('N', 'srv', { names: ['srv'], ipv4: '10.1.0.2', ipv6: 'fd00:1::2', sandbox: 's-srv' });
    l.add('N', 'cli', {
      names: ['cli'],
      ipv4: '10.1.0.3',
      sandbox: 's-cli',
      links: [{ alias: 'db', name: 'srv' }],
    });
    l.add('N', 'other', { names: ['other'], ipv4: '10.1.0.4', sandbox: 's-other' });
    assert.deepEqual(l.lookup(['N'], 'db', 4, 's-cli').addresses, ['10.1.0.2']);
    assert.deepEqual(l.lookup(['N'], 'DB.net', 6, 's-cli').addresses, ['fd00:1::2']);
    assert.equal(l.lookup(['N'], 'db', 4, 's-other').found, false);
    assert.equal(l.lookup(['N'], 'db', 4).found, false);
    // the target started again with another address: the alias follows
    l.add('N', 'srv', { names: ['srv'], ipv4: '10.1.0.9', sandbox: 's-srv' });
    assert.deepEqual(l.lookup(['N'], 'db', 4, 's-cli').addresses, ['10.1.0.9']);
    // a target not on the network: no answer of the network's (forwarded)
    l.add('N', 'cli', {
      names: ['cli'],
      ipv4: '10.1.0.3',
      sandbox: 's-cli',
      links: [{ alias: 'x', name: 'far' }],
    });
    assert.equal(l.lookup(['N'], 'x', 4, 's-cli').found, false);
  });

  it('answers PTR with <first name>.<network> and knows its blocks', () => {
    assert.equal(ptrAddress('2.0.30.172.in-addr.arpa.'), '172.30.0.2');
    assert.equal(ptrName('172.30.0.2'), '2.0.30.172.in-addr.arpa');
    assert.equal(ptrAddress(ptrName('fd00:b::2')), 'fd00:000b:0000:0000:0000:0000:0000:0002');
    assert.equal(ptrAddress('1.2.3.in-addr.arpa'), undefined);
    assert.equal(r.reverse(['A'], '172.30.0.2'), 'Web.front');
    assert.equal(r.reverse(['B'], 'fd00:b:0::2'), 'web.back');
    assert.equal(r.reverse(['A'], '172.31.0.2'), undefined);
    assert.equal(r.ours(['A'], '172.30.0.77'), true);
    assert.equal(r.ours(['A'], '10.0.0.1'), false);
  });

  it('resolves a name several endpoints share to all their addresses', () => {
    const s = new DnsRecords();
    s.set('N', [
      { names: ['svc'], ipv4: '10.9.0.2' },
      { names: ['svc'], ipv4: '10.9.0.3' },
    ]);
    assert.deepEqual(s.lookup(['N'], 'svc', 4).addresses, ['10.9.0.2', '10.9.0.3']);
    s.remove('N', '#0');
    assert.deepEqual(s.lookup(['N'], 'svc', 4).addresses, ['10.9.0.3']);
  });
});

describe('host resolvers', () => {
  it('drops loopback nameservers and falls back to Google as dockerd does', () => {
    const conf = parseResolvConf('# x\nnameserver 127.0.0.53\nsearch a b\noptions edns0\noptions ndots:2\n');
    assert.deepEqual(conf, {
      nameservers: ['127.0.0.53'],
      search: ['a', 'b'],
      options: ['edns0', 'ndots:2'],
      other: [],
    });
    assert.deepEqual(usableNameservers(conf.nameservers), ['8.8.8.8', '8.8.4.4']);
    assert.deepEqual(usableNameservers(['::1', '10.0.0.1', 'fd00::53']), ['10.0.0.1', 'fd00::53']);
    assert.equal(onlyResolvedStub('nameserver 127.0.0.53\n'), true);
    assert.equal(onlyResolvedStub('nameserver 127.0.0.53\nnameserver 1.1.1.1\n'), false);
  });

  it('reads upstream addresses with and without ports', () => {
    assert.deepEqual(parseUpstream('10.0.0.1'), { host: '10.0.0.1', port: 53 });
    assert.deepEqual(parseUpstream('127.0.0.1:5353'), { host: '127.0.0.1', port: 5353 });
    assert.deepEqual(parseUpstream('[::1]:5300'), { host: '::1', port: 5300 });
    assert.equal(parseUpstream('dns.example'), undefined);
    assert.equal(parseUpstream('1.2.3.4:99999'), undefined);
  });
});

describe('the embedded DNS on loopback', () => {
  const world = new FakeUpstream('192.0.2.99');
  const own = new FakeUpstream('192.0.2.77');
  let dns: EmbeddedDns;
  let port = 0;
  let portB = 0;

  before(async () => {
    await world.start();
    await own.start();
    dns = new EmbeddedDns({ log, upstreams: () => [`127.0.0.1:${world.port}`], timeoutMs: 300 });
    port = (await dns.serve('A', { address: '127.0.0.2', port: 0, domain: 'front' })).port;
    portB = (await dns.serve('B', { address: '127.0.0.3', port: 0, domain: 'back' })).port;
    dns.setRecords('A', [
      { names: ['web', 'www', '0123456789ab'], ipv4: '172.30.0.2', ipv6: 'fd00:a::2' },
      ...[...Array(40)].map((_, i) => ({ names: ['many'], ipv4: `172.30.1.${i + 1}` })),
    ]);
    dns.addEndpoint('B', 'db', { names: ['db'], ipv4: '172.31.0.3' });
  });

  after(async () => {
    await dns.close();
    await world.stop();
    await own.stop();
  });

  it('answers A and AAAA for names of the network, over UDP and TCP', async () => {
    const a = await udpAsk('127.0.0.2', port, query('web', TYPE.A));
    assert.equal(a.header.rcode, RCODE.NOERROR);
    assert.equal(a.header.id, 0x1234);
    assert.deepEqual(a.answers.map(ipv4Of), ['172.30.0.2']);
    assert.equal(a.answers[0]?.ttl, 600);
    const aaaa = await tcpAsk('127.0.0.2', port, query('www.front', TYPE.AAAA));
    assert.equal(aaaa.answers[0]?.data.toString('hex'), 'fd00000a000000000000000000000002');
    const ptr = await udpAsk('127.0.0.2', port, query(ptrName('172.30.0.2'), TYPE.PTR));
    assert.equal(readName(ptr.answers[0]?.data ?? Buffer.alloc(1), 0).name, 'web.front');
  });

  it("does not show one network's names through another's responder", async () => {
    const r = await udpAsk('127.0.0.3', portB, query('web', TYPE.A));
    // forwarded: the world does not know it either
    assert.equal(r.header.rcode, RCODE.NXDOMAIN);
    assert.deepEqual((await udpAsk('127.0.0.3', portB, query('db', TYPE.A))).answers.map(ipv4Of), [
      '172.31.0.3',
    ]);
    assert.equal((await udpAsk('127.0.0.2', port, query('db', TYPE.A))).header.rcode, RCODE.NXDOMAIN);
  });

  it('forwards other names to the upstream servers', async () => {
    const r = await udpAsk('127.0.0.2', port, query('host.example', TYPE.A));
    assert.equal(r.header.rcode, RCODE.NOERROR);
    assert.deepEqual(r.answers.map(ipv4Of), ['192.0.2.99']);
    const t = await tcpAsk('127.0.0.2', port, query('host.example', TYPE.A));
    assert.deepEqual(t.answers.map(ipv4Of), ['192.0.2.99']);
  });

  it("forwards a container's queries to its own Dns servers", async () => {
    // the client's address (loopback here) is an endpoint of the network with its own servers
    dns.addEndpoint('B', 'me', { names: ['me'], ipv4: '127.0.0.1', upstreams: [`127.0.0.1:${own.port}`] });
    try {
      const r = await udpAsk('127.0.0.3', portB, query('x.example', TYPE.A));
      assert.deepEqual(r.answers.map(ipv4Of), ['192.0.2.77']);
    } finally {
      dns.removeEndpoint('B', 'me');
    }
  });

  it('never forwards to itself', async () => {
    dns.addEndpoint('B', 'me', {
      names: ['me'],
      ipv4: '127.0.0.1',
      upstreams: [`127.0.0.2:${port}`, `127.0.0.3:${portB}`],
    });
    try {
      const started = Date.now();
      const r = await udpAsk('127.0.0.3', portB, query('x.example', TYPE.A));
      assert.equal(r.header.rcode, RCODE.SERVFAIL);
      assert.ok(Date.now() - started < 250);
    } finally {
      dns.removeEndpoint('B', 'me');
    }
  });

  it('keeps single-label names in when the container set ndots (dockerd: answered empty)', async () => {
    dns.addEndpoint('B', 'me', { names: ['me'], ipv4: '127.0.0.1', ndotsSet: true });
    try {
      const before = world.seen.length;
      const r = await udpAsk('127.0.0.3', portB, query('elsewhere', TYPE.A));
      assert.equal(r.header.rcode, RCODE.NOERROR);
      assert.equal(r.answers.length, 0);
      assert.equal(world.seen.length, before);
      const dotted = await udpAsk('127.0.0.3', portB, query('x.example', TYPE.A));
      assert.deepEqual(dotted.answers.map(ipv4Of), ['192.0.2.99']);
    } finally {
      dns.removeEndpoint('B', 'me');
    }
  });

  it('answers SERVFAIL when no upstream answers in time, and tries the next after a SERVFAIL', async () => {
    const r = await udpAsk('127.0.0.2', port, query('slow.example', TYPE.A));
    assert.equal(r.header.rcode, RCODE.SERVFAIL);
    const reply = await forwardQuery(
      query('fail.example', TYPE.A),
      [`127.0.0.1:${own.port}`, `127.0.0.1:${world.port}`],
      {
        tcp: false,
        timeoutMs: 300,
      },
    );
    assert.equal(readReply(reply ?? Buffer.alloc(12)).header.rcode, RCODE.SERVFAIL);
  });

  it('gives up at once on a server it has no route to (the connect error), and goes on', async () => {
    // a namespace with no route anywhere: the UDP connect itself fails (ENETUNREACH); the query
    // must end without a reply, and nothing be thrown from the socket's callback
    const script = [
      "import { forwardQuery } from './src/engine/network/dns/dns.forward.ts';",
      "import { query } from './test/unit/engine/network/dns-client.ts';",
      "process.on('uncaughtException', (e) => { console.log('uncaught', e.message); process.exit(3); });",
      'const t = Date.now();',
      "const r = await forwardQuery(query('x.example', 1), ['10.255.255.53', '192.0.2.1'], { tcp: false, timeoutMs: 4000 });",
      "console.log(JSON.stringify({ reply: r === undefined ? 'none' : 'some', ms: Date.now() - t }));",
    ].join('\n');
    const r = await runCommand('unshare', ['-n', ...nodeScript(script)]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = JSON.parse(r.stdout.trim()) as { reply: string; ms: number };
    assert.equal(out.reply, 'none');
    assert.ok(out.ms < 2000, `took ${out.ms} ms: the timeout, not the connect error, ended it`);
  });

  it('truncates over UDP and answers in full over TCP', async () => {
    const u = await udpAsk('127.0.0.2', port, query('many', TYPE.A));
    assert.equal(u.header.truncated, true);
    assert.ok(u.raw.length <= 512);
    const big = await udpAsk('127.0.0.2', port, query('many', TYPE.A, { edns: 4096 }));
    assert.equal(big.header.truncated, false);
    assert.equal(big.answers.length, 40);
    const t = await tcpAsk('127.0.0.2', port, query('many', TYPE.A));
    assert.equal(t.header.truncated, false);
    assert.equal(t.answers.length, 40);
    // a forwarded answer too large for UDP: truncated by the upstream, the full one over TCP
    const fu = await udpAsk('127.0.0.2', port, query('big.example', TYPE.A));
    assert.equal(fu.header.truncated, true);
    const ft = await tcpAsk('127.0.0.2', port, query('big.example', TYPE.A));
    assert.equal(ft.answers.length, 60);
  });

  it('answers FORMERR to what it cannot read, NOTIMP to other opcodes, nothing to responses', async () => {
    const bad = Buffer.from([0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c]);
    const r = await udpAsk('127.0.0.2', port, bad);
    assert.equal(r.header.rcode, RCODE.FORMERR);
    assert.equal(r.header.id, 0xabcd);
    const notify = query('web', TYPE.A);
    notify.writeUInt16BE(0x2000, 2);
    assert.equal((await udpAsk('127.0.0.2', port, notify)).header.rcode, RCODE.NOTIMP);
    const response = query('web', TYPE.A);
    response.writeUInt16BE(0x8100, 2);
    assert.equal(await dns.answer('A', response, '127.0.0.1', false), undefined);
    assert.equal(await dns.answer('A', Buffer.alloc(5), '127.0.0.1', false), undefined);
  });

  it('stops answering when stopped, and the address can be served again', async () => {
    const extra = await dns.serve('C', { address: '127.0.0.4', port: 0 });
    dns.setRecords('C', [{ names: ['c'], ipv4: '10.0.0.9' }]);
    assert.deepEqual((await udpAsk('127.0.0.4', extra.port, query('c', TYPE.A))).answers.map(ipv4Of), [
      '10.0.0.9',
    ]);
    await dns.stop('C');
    await assert.rejects(tcpAsk('127.0.0.4', extra.port, query('c', TYPE.A)), /ECONNREFUSED/);
    const again = await dns.serve('C', { address: '127.0.0.4', port: extra.port });
    assert.equal(again.port, extra.port);
    assert.equal(dns.records.entries('C').length, 0);
    await dns.stop('C');
  });

  it('forwards nothing for an Internal network', async () => {
    const internal = await dns.serve('I', { address: '127.0.0.6', port: 0, forward: false });
    dns.setRecords('I', [{ names: ['in'], ipv4: '10.0.0.8' }]);
    try {
      const before = world.seen.length;
      const r = await udpAsk('127.0.0.6', internal.port, query('leak.example', TYPE.A));
      assert.equal(r.header.rcode, RCODE.SERVFAIL);
      assert.equal(world.seen.length, before);
      const own = await udpAsk('127.0.0.6', internal.port, query('in', TYPE.A));
      assert.deepEqual(own.answers.map(ipv4Of), ['10.0.0.8']);
    } finally {
      await dns.stop('I');
    }
  });

  it('survives being stopped while answers are on their way', async () => {
    const l = await dns.serve('S', { address: '127.0.0.7', port: 0 });
    const sock = createSocket('udp4');
    for (let i = 0; i < 5; i++) sock.send(query('slow.example', TYPE.A, { id: i }), l.port, '127.0.0.7');
    await new Promise((r) => setTimeout(r, 30));
    await dns.stop('S');
    // the forwarded queries time out (300 ms) after the sockets are gone
    await new Promise((r) => setTimeout(r, 400));
    sock.close();
  });

  it('answers several queries sent at once on one TCP connection', async () => {
    const frame = (m: Buffer) => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(m.length, 0);
      return Buffer.concat([len, m]);
    };
    const replies = await new Promise<number[]>((resolve, reject) => {
      const sock = connect({ host: '127.0.0.2', port });
      let buf = Buffer.alloc(0);
      const ids: number[] = [];
      sock.on('error', reject);
      sock.on('connect', () => {
        sock.write(
          Buffer.concat([frame(query('web', TYPE.A, { id: 1 })), frame(query('www', TYPE.A, { id: 2 }))]),
        );
      });
      sock.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          ids.push(buf.readUInt16BE(2));
          buf = buf.subarray(2 + buf.readUInt16BE(0));
        }
        if (ids.length === 2) {
          sock.destroy();
          resolve(ids.sort());
        }
      });
    });
    assert.deepEqual(replies, [1, 2]);
  });

  it('answers SERVFAIL at once beyond the forwarded queries it may have in flight', async () => {
    const small = new EmbeddedDns({
      log,
      upstreams: () => [`127.0.0.1:${world.port}`],
      timeoutMs: 300,
      maxInFlight: 2,
    });
    try {
      const l = await small.serve('M', { address: '127.0.0.8', port: 0 });
      const started = Date.now();
      const took = await Promise.all(
        [0, 1, 2, 3].map(async (id) => {
          const a = await udpAsk('127.0.0.8', l.port, query(`slow.${id}.example`, TYPE.A, { id }));
          assert.equal(a.header.rcode, RCODE.SERVFAIL);
          return Date.now() - started;
        }),
      );
      // two wait for the silent upstream (300 ms), two are refused at once
      took.sort((a, b) => a - b);
      assert.ok((took[1] ?? 0) < 250 && (took[2] ?? 0) >= 250, JSON.stringify(took));
    } finally {
      await small.close();
    }
  });

  it('serves and stops one network in order, however they are called', async () => {
    const [a, b] = await Promise.all([
      dns.serve('Q', { address: '127.0.0.10', port: 0 }),
      dns.serve('Q', { address: '127.0.0.10', port: 0 }),
    ]);
    assert.equal(a.port, b.port);
    const stopped = dns.stop('Q');
    const again = dns.serve('Q', { address: '127.0.0.10', port: a.port });
    await stopped;
    assert.equal((await again).port, a.port);
    await dns.stop('Q');
    assert.equal(dns.listening('Q'), undefined);
  });

  it('refuses an address that is taken', async () => {
    await assert.rejects(dns.serve('D', { address: '127.0.0.2', port }), /EADDRINUSE/);
  });
});
