import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isKind } from '../../../../../src/common/errors.js';
import { normalizeVips, vipTableScript } from '../../../../../src/engine/network/lb/vip-rules.js';

describe('VIP table script', () => {
  it('DNATs each VIP round robin over its backends and refuses a VIP without any', () => {
    const script = vipTableScript([
      { vip: '10.0.1.100', backends: ['10.0.1.4', '10.0.1.3', '10.0.1.3', '10.0.1.12'] },
      { vip: '10.0.1.101', backends: ['10.0.1.5'] },
      { vip: '10.0.1.9', backends: [] },
    ]);
    assert.equal(
      script,
      [
        'table ip berth-vip',
        'delete table ip berth-vip',
        'table ip berth-vip {',
        '\tchain vip-dnat {',
        '\t\ttype nat hook output priority -100; policy accept;',
        '\t\tip daddr 10.0.1.100 dnat to numgen inc mod 3 map { 0 : 10.0.1.3, 1 : 10.0.1.4, 2 : 10.0.1.12 }',
        '\t\tip daddr 10.0.1.101 dnat to 10.0.1.5',
        '\t}',
        '\tchain vip-refuse {',
        '\t\ttype filter hook output priority 0; policy accept;',
        '\t\tip daddr 10.0.1.9 meta l4proto tcp reject with tcp reset',
        '\t\tip daddr 10.0.1.9 reject',
        '\t}',
        '}',
        '',
      ].join('\n'),
    );
  });

  it('deletes the table when there is no VIP (no error when it is not there: made, then deleted)', () => {
    assert.equal(vipTableScript([]), 'table ip berth-vip\ndelete table ip berth-vip\n');
  });

  it('gives one table for one set, whatever the order', () => {
    const a = vipTableScript([
      { vip: '10.0.0.10', backends: ['10.0.0.3', '10.0.0.2'] },
      { vip: '10.0.0.9', backends: ['10.0.0.4'] },
    ]);
    const b = vipTableScript([
      { vip: '10.0.0.9', backends: ['10.0.0.4', '10.0.0.4'] },
      { vip: '10.0.0.10', backends: ['10.0.0.2', '10.0.0.3'] },
    ]);
    assert.equal(a, b);
    assert.deepEqual(
      normalizeVips([
        { vip: '10.0.0.10', backends: [] },
        { vip: '10.0.0.9', backends: [] },
      ]).map((v) => v.vip),
      ['10.0.0.9', '10.0.0.10'],
    );
  });

  it('refuses what is not an IPv4 address, and a VIP given twice', () => {
    for (const bad of [
      [{ vip: '10.0.0.1/24', backends: [] }],
      [{ vip: '10.0.0.1', backends: ['fe80::1'] }],
      [{ vip: '10.0.0.1', backends: ['10.0.0.2; flush ruleset'] }],
      [{ vip: '10.0.0.256', backends: [] }],
      [
        { vip: '10.0.0.1', backends: [] },
        { vip: '10.0.0.1', backends: ['10.0.0.2'] },
      ],
    ]) {
      assert.throws(
        () => vipTableScript(bad),
        (err) => isKind(err, 'InvalidParameter'),
        JSON.stringify(bad),
      );
    }
  });
});
