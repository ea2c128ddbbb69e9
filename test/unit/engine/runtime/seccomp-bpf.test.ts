import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  bpfFileContent,
  readBpfFile,
  SeccompBpfCache,
  seccompProgram,
} from '../../../../src/engine/runtime/driver/seccomp-bpf.js';
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

describe('SeccompBpfCache on disk', () => {
  const counting = () => {
    const seen: string[] = [];
    const compile = async (program: string) => {
      seen.push(program);
      return Buffer.alloc(16, 7);
    };
    return { seen, compile };
  };

  it('a new cache (an engine restart) reads the filter compiled before; another salt compiles again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-bpf-'));
    try {
      const first = counting();
      const disk = { dir: join(dir, 'seccomp'), salt: async () => 'x86_64\n1.8.1' };
      const bpf = await new SeccompBpfCache(first.compile, undefined, disk).bpf(filter);
      assert.equal(bpf, Buffer.alloc(16, 7).toString('base64'));
      assert.equal(first.seen.length, 1);
      const files = await readdir(disk.dir);
      assert.equal(files.length, 1);
      assert.match(files[0] ?? '', /^[0-9a-f]{64}\.bpf$/);

      const second = counting();
      assert.equal(await new SeccompBpfCache(second.compile, undefined, disk).bpf(filter), bpf);
      assert.equal(second.seen.length, 0, 'read from the file, not compiled');

      const upgraded = counting();
      const other = { ...disk, salt: async () => 'x86_64\n1.9.0' };
      await new SeccompBpfCache(upgraded.compile, undefined, other).bpf(filter);
      assert.equal(upgraded.seen.length, 1, 'another runtime version compiles again');
      assert.equal((await readdir(disk.dir)).length, 2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a torn or altered file is compiled again and rewritten, never used', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-bpf-'));
    try {
      const disk = { dir: join(dir, 'seccomp'), salt: async () => 'salt' };
      await new SeccompBpfCache(counting().compile, undefined, disk).bpf(filter);
      const file = join(disk.dir, (await readdir(disk.dir))[0] ?? '');
      const whole = await readFile(file);
      const damaged: Buffer[] = [
        whole.subarray(0, whole.length - 8), // truncated (still a multiple of 8 bytes)
        Buffer.concat([Buffer.alloc(8, 1), whole.subarray(8)]), // altered
        Buffer.alloc(0),
      ];
      for (const bad of damaged) {
        await writeFile(file, bad);
        const c = counting();
        assert.equal(
          await new SeccompBpfCache(c.compile, undefined, disk).bpf(filter),
          Buffer.alloc(16, 7).toString('base64'),
        );
        assert.equal(c.seen.length, 1);
        assert.ok((await readFile(file)).equals(whole), 'rewritten whole');
      }
      assert.equal(readBpfFile(whole)?.length, 16);
      assert.ok(bpfFileContent(Buffer.alloc(16, 7)).equals(whole));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
