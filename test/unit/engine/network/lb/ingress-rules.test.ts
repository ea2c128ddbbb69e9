import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isKind } from '../../../../../src/common/errors.js';
import {
  hostIngressScript,
  ingressLink,
  normalizePorts,
  sandboxIngressScript,
} from '../../../../../src/engine/network/lb/ingress-rules.js';
import type { IngressPort } from '../../../../../src/engine/network/lb/lb.types.js';

const link = ingressLink('169.254.239.240/30');
const ports: IngressPort[] = [
  { protocol: 'udp', publishedPort: 53, targetPort: 5353, backends: ['10.0.0.5'] },
  { protocol: 'tcp', publishedPort: 8080, targetPort: 80, backends: ['10.0.0.6', '10.0.0.5'] },
  { protocol: 'tcp', publishedPort: 30000, targetPort: 80, backends: [] },
];

describe('ingress rules', () => {
  it('puts the host at .1 and the sandbox at .2 of the link block', () => {
    assert.deepEqual(link, { hostIp: '169.254.239.241', sandboxIp: '169.254.239.242', prefixLen: 30 });
    for (const bad of ['169.254.239.240/31', '169.254.239.240', 'x/30'])
      assert.throws(
        () => ingressLink(bad),
        (err) => isKind(err, 'InvalidParameter'),
        bad,
      );
  });

  it('sends every published port on a local address to the sandbox, loopback masqueraded', () => {
    const script = hostIngressScript('berth-ingress', 'berth-ingress', link, normalizePorts(ports));
    assert.equal(
      script,
      [
        'table ip berth-ingress',
        'delete table ip berth-ingress',
        'table ip berth-ingress {',
        '\tchain ingress-raw {',
        '\t\ttype filter hook prerouting priority -300; policy accept;',
        '\t\tiifname "berth-ingress" ip daddr 127.0.0.0/8 drop',
        '\t}',
        '\tchain ingress-pre {',
        '\t\ttype nat hook prerouting priority -100; policy accept;',
        '\t\tfib daddr type local tcp dport { 8080, 30000 } dnat to 169.254.239.242',
        '\t\tfib daddr type local udp dport 53 dnat to 169.254.239.242',
        '\t}',
        '\tchain ingress-out {',
        '\t\ttype nat hook output priority -100; policy accept;',
        '\t\tfib daddr type local tcp dport { 8080, 30000 } dnat to 169.254.239.242',
        '\t\tfib daddr type local udp dport 53 dnat to 169.254.239.242',
        '\t}',
        '\tchain ingress-post {',
        '\t\ttype nat hook postrouting priority 100; policy accept;',
        '\t\toifname "berth-ingress" ip saddr 127.0.0.0/8 masquerade',
        '\t}',
        '}',
        '',
      ].join('\n'),
    );
    assert.equal(
      hostIngressScript('x', 'x', link, []),
      'table ip x\ndelete table ip x\n',
      'no port: no table on the host',
    );
  });

  it('spreads each port over its backends in the sandbox and forwards nothing else', () => {
    const script = sandboxIngressScript(normalizePorts(ports));
    assert.equal(
      script,
      [
        'table ip berth-ingress',
        'delete table ip berth-ingress',
        'table ip berth-ingress {',
        '\tchain ingress-dnat {',
        '\t\ttype nat hook prerouting priority -100; policy accept;',
        '\t\tiifname "host0" tcp dport 8080 dnat to numgen inc mod 2 map { 0 : 10.0.0.5 . 80, 1 : 10.0.0.6 . 80 }',
        '\t\tiifname "host0" udp dport 53 dnat to 10.0.0.5:5353',
        '\t}',
        '\tchain ingress-snat {',
        '\t\ttype nat hook postrouting priority 100; policy accept;',
        '\t\toifname != "host0" ct status dnat masquerade',
        '\t}',
        '\tchain ingress-fwd {',
        '\t\ttype filter hook forward priority 0; policy drop;',
        '\t\tct state established,related accept',
        '\t\tiifname "host0" ct status dnat accept',
        '\t}',
        '}',
        '',
      ].join('\n'),
    );
    assert.doesNotMatch(sandboxIngressScript([]), /dnat to/);
    assert.match(sandboxIngressScript([]), /policy drop/);
  });

  it('refuses bad ports, protocols, addresses and a port given twice', () => {
    const base: IngressPort = { protocol: 'tcp', publishedPort: 80, targetPort: 80, backends: [] };
    for (const bad of [
      [{ ...base, publishedPort: 0 }],
      [{ ...base, targetPort: 65536 }],
      [{ ...base, publishedPort: 1.5 }],
      [{ ...base, protocol: 'sctp' }],
      [{ ...base, backends: ['10.0.0.1 . 22'] }],
      [base, { ...base, targetPort: 81 }],
    ] as IngressPort[][]) {
      assert.throws(
        () => normalizePorts(bad),
        (err) => isKind(err, 'InvalidParameter'),
        JSON.stringify(bad),
      );
    }
    // one port number in both protocols is two ports
    assert.equal(normalizePorts([base, { ...base, protocol: 'udp' }]).length, 2);
  });
});
