import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SeccompBpfCache, seccompProgram } from '../../../../src/engine/runtime/driver/seccomp-bpf.js';
import type { OciSeccomp } from '../../../../src/engine/runtime/oci/spec.types.js';

const filter: OciSeccomp = {
  defaultAction: 'SCMP_ACT_ERRNO',
  architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'],
  syscalls: [
    { names: ['read', 'write'], action: 'SCMP_ACT_ALLOW' },
    { names: ['ptrace'], action: 'SCMP_ACT_ERRNO' },
    {
      names: ['clone'],
      action: 'SCMP_ACT_ALLOW',
      args: [
        { index: 0, value: 2114060288, op: 'SCMP_CMP_MASKED_EQ' },
        { index: 0, value: 1, valueTwo: 2, op: 'SCMP_CMP_NE' },
      ],
    },
    {
      names: ['personality'],
      action: 'SCMP_ACT_TRACE',
      errnoRet: 7,
      args: [{ index: 0, value: 8, op: 'SCMP_CMP_EQ' }],
    },
  ],
};

describe('seccompProgram (the helper input, as crun builds the filter)', () => {
  it('maps actions, architectures and arguments; skips rules with the default action', () => {
    assert.equal(
      seccompProgram(filter),
      [
        `default ${0x00050001}`,
        'arch x86_64',
        'arch x86',
        `rule ${0x7fff0000} read 0`,
        `rule ${0x7fff0000} write 0`,
        // a repeated argument index: one rule per comparison, as crun does
        `rule ${0x7fff0000} clone 1 0 7 2114060288 0`,
        `rule ${0x7fff0000} clone 1 0 1 1 2`,
        `rule ${0x7ff00007} personality 1 0 4 8 0`,
        '',
      ].join('\n'),
    );
  });

  it('leaves to crun what it handles specially or refuses', () => {
    assert.equal(seccompProgram({ defaultAction: 'SCMP_ACT_NOTIFY' }), null);
    assert.equal(seccompProgram({ defaultAction: 'SCMP_ACT_ALLOW', defaultErrnoRet: 1 }), null);
    const bad = (s: OciSeccomp['syscalls']) =>
      seccompProgram({ defaultAction: 'SCMP_ACT_ALLOW', syscalls: s });
    assert.equal(bad([{ names: ['read'], action: 'SCMP_ACT_BOGUS' }]), null);
    assert.equal(
      bad([{ names: ['read'], action: 'SCMP_ACT_ERRNO', args: [{ index: 0, value: 1, op: 'X' }] }]),
      null,
    );
    assert.equal(
      bad([{ names: ['read'], action: 'SCMP_ACT_ERRNO', args: [{ index: 6, value: 1, op: 'SCMP_CMP_EQ' }] }]),
      null,
    );
    assert.equal(bad([{ names: ['read\nrule'], action: 'SCMP_ACT_ERRNO' }]), null);
  });
});

describe('SeccompBpfCache', () => {
  it('compiles each distinct filter once', async () => {
    const seen: string[] = [];
    const cache = new SeccompBpfCache(async (program) => {
      seen.push(program);
      return Buffer.alloc(16, seen.length);
    });
    const [a, b] = await Promise.all([cache.bpf(filter), cache.bpf(structuredClone(filter))]);
    assert.equal(a, Buffer.alloc(16, 1).toString('base64'));
    assert.equal(b, a);
    const other = await cache.bpf({ defaultAction: 'SCMP_ACT_ALLOW' });
    assert.equal(other, Buffer.alloc(16, 2).toString('base64'));
    assert.equal(seen.length, 2);
    assert.equal(cache.size, 2);
  });

  it('falls back to the plain filter (null) when compiling fails or yields no program', async () => {
    const errors: unknown[] = [];
    const failing = new SeccompBpfCache(
      async () => {
        throw new Error('no libseccomp');
      },
      (err) => errors.push(err),
    );
    assert.equal(await failing.bpf(filter), null);
    assert.equal(errors.length, 1);
    assert.equal(await new SeccompBpfCache(async () => Buffer.alloc(5)).bpf(filter), null);
    assert.equal(await failing.bpf({ defaultAction: 'SCMP_ACT_NOTIFY' }), null);
  });
});
