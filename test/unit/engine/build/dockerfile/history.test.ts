import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Instruction } from '../../../../../src/engine/build/build.types.js';
import { goDuration, healthText } from '../../../../../src/engine/build/dockerfile/history.js';
import {
  copyHistory,
  expandInstruction,
  nopHistory,
  parseBuildDockerfile,
  parseOnbuildTriggers,
  resolveCmdLine,
  resolveWorkdir,
  runCommand,
  runHistoryCmd,
} from '../../../../../src/engine/build/dockerfile/index.js';

const instructions = (text: string): Instruction[] =>
  parseBuildDockerfile(`FROM busybox\n${text}`).stages[0]?.instructions ?? [];
const first = (text: string): Instruction => instructions(text)[0] as Instruction;

describe('nopHistory', () => {
  it('writes what dockerd 20.10 writes (recorded with docker history --no-trunc)', () => {
    const env = ['b=3'];
    const cases: Array<[string, string]> = [
      ['CMD ["a b",\t"c"]', '/bin/sh -c #(nop)  CMD ["a b" "c"]'],
      ['ENV X=1 Y="a b"', '/bin/sh -c #(nop)  ENV X=1 Y=a b'],
      ['ENV Z v w', '/bin/sh -c #(nop)  ENV Z=v w'],
      ['LABEL a=b c="d e"', '/bin/sh -c #(nop)  LABEL a=b c=d e'],
      ['USER 1:2', '/bin/sh -c #(nop)  USER 1:2'],
      ['EXPOSE 80 53/udp', '/bin/sh -c #(nop)  EXPOSE 53/udp 80'],
      ['EXPOSE $b 1/udp', '/bin/sh -c #(nop)  EXPOSE 3 1/udp'],
      ['VOLUME /v ["/w"]', '/bin/sh -c #(nop)  VOLUME [/v [/w]]'],
      ['STOPSIGNAL 9', '/bin/sh -c #(nop)  STOPSIGNAL 9'],
      ['ENTRYPOINT echo hi', '/bin/sh -c #(nop)  ENTRYPOINT ["/bin/sh" "-c" "echo hi"]'],
      ['ENTRYPOINT', '/bin/sh -c #(nop)  ENTRYPOINT []'],
      ['CMD', '/bin/sh -c #(nop)  CMD ["/bin/sh" "-c"]'],
      [
        'HEALTHCHECK --interval=5s CMD true',
        `/bin/sh -c #(nop)  HEALTHCHECK &{["CMD-SHELL" "true"] "5s" "0s" "0s" '\\x00'}`,
      ],
      [
        'HEALTHCHECK --interval=90s --timeout=100ms --retries=65 CMD ["x"]',
        `/bin/sh -c #(nop)  HEALTHCHECK &{["CMD" "x"] "1m30s" "100ms" "0s" 'A'}`,
      ],
      ['ARG q=1', '/bin/sh -c #(nop)  ARG q=1'],
      ['ARG a b=2', '/bin/sh -c #(nop)  ARG a b=2'],
      ['ONBUILD RUN x', '/bin/sh -c #(nop)  ONBUILD RUN x'],
      ['MAINTAINER me', '/bin/sh -c #(nop)  MAINTAINER me'],
      ['SHELL ["/bin/sh","-c"]', '/bin/sh -c #(nop)  SHELL [/bin/sh -c]'],
    ];
    for (const [line, want] of cases) {
      const instr = expandInstruction(first(line), env, '\\');
      assert.equal(nopHistory(instr), want, line);
    }
  });

  it('follows a whole Dockerfile as dockerd 20.10 did (ENV, ARG, SHELL and WORKDIR in force)', () => {
    const p = parseBuildDockerfile(
      'FROM busybox\nONBUILD   RUN echo  hi  \nARG X=v1 Y\nENV P=${X}-x Q=\'$X\' R="a\\"b"\nLABEL "k k"=$P\nEXPOSE $Y 8080/tcp\nUSER ${X:-u}\nSHELL ["/bin/sh", "-e", "-c"]\nWORKDIR /w/$X\nWORKDIR sub\nCMD echo $X\nENTRYPOINT ["a"]\nVOLUME ["/data", "/$X"]\nSTOPSIGNAL SIGKILL\nHEALTHCHECK --retries=3 --start-period=2m --timeout=1500ms CMD ["a", "b c"]\nMAINTAINER a <b@c>\nARG Z\n',
    );
    // `docker history --no-trunc` of the image dockerd 20.10 built, oldest first.
    const want = [
      '/bin/sh -c #(nop)  ONBUILD RUN echo  hi  ',
      '/bin/sh -c #(nop)  ARG X=v1 Y',
      '/bin/sh -c #(nop)  ENV P=v1-x Q=$X R=a"b',
      '/bin/sh -c #(nop)  LABEL k k=v1-x',
      '/bin/sh -c #(nop)  EXPOSE 8080/tcp',
      '/bin/sh -c #(nop)  USER v1',
      '/bin/sh -e -c #(nop)  SHELL [/bin/sh -e -c]',
      '/bin/sh -e -c #(nop) WORKDIR /w/v1',
      '/bin/sh -e -c #(nop) WORKDIR /w/v1/sub',
      '/bin/sh -e -c #(nop)  CMD ["/bin/sh" "-e" "-c" "echo $X"]',
      '/bin/sh -e -c #(nop)  ENTRYPOINT ["a"]',
      '/bin/sh -e -c #(nop)  VOLUME [/data /v1]',
      '/bin/sh -e -c #(nop)  STOPSIGNAL SIGKILL',
      `/bin/sh -e -c #(nop)  HEALTHCHECK &{["CMD" "a" "b c"] "0s" "1.5s" "2m0s" '\\x03'}`,
      '/bin/sh -e -c #(nop)  MAINTAINER a <b@c>',
      '/bin/sh -e -c #(nop)  ARG Z',
    ];
    let env = ['PATH=/bin'];
    const args: string[] = [];
    let shell: string[] = ['/bin/sh', '-c'];
    let workingDir = '';
    const got: string[] = [];
    for (const raw of p.stages[0]?.instructions ?? []) {
      const instr = expandInstruction(raw, [...env, ...args], p.escapeToken);
      if (instr.kind === 'workdir') workingDir = resolveWorkdir(workingDir, instr.value);
      got.push(nopHistory(instr, { shell, workingDir }) ?? '');
      if (instr.kind === 'env') env = [...env, ...instr.pairs.map(([k, v]) => `${k}=${v}`)];
      if (instr.kind === 'arg')
        for (const a of instr.args) if (a.value !== undefined) args.unshift(`${a.name}=${a.value}`);
      if (instr.kind === 'shell') shell = instr.shell;
    }
    assert.deepEqual(got, want);
    // Step lines print the instruction trimmed.
    assert.equal(p.stages[0]?.instructions[0]?.original, 'ONBUILD   RUN echo  hi');
  });

  it('uses the stage shell, the new one for SHELL, and the resolved WORKDIR', () => {
    const bash = ['/bin/bash', '-c'];
    assert.equal(nopHistory(first('ENV A=1'), { shell: bash }), '/bin/bash -c #(nop)  ENV A=1');
    assert.equal(
      nopHistory(first('CMD x'), { shell: bash }),
      '/bin/bash -c #(nop)  CMD ["/bin/bash" "-c" "x"]',
    );
    assert.equal(
      nopHistory(first('SHELL ["/bin/ash", "-e", "-c"]')),
      '/bin/ash -e -c #(nop)  SHELL [/bin/ash -e -c]',
    );
    // dockerd 20.10: WORKDIR rel, then WORKDIR ../x/./y
    const rel = resolveWorkdir('', 'rel');
    assert.equal(rel, '/rel');
    assert.equal(nopHistory(first('WORKDIR rel'), { workingDir: rel }), '/bin/sh -c #(nop) WORKDIR /rel');
    assert.equal(resolveWorkdir(rel, '../x/./y'), '/x/y');
    assert.equal(resolveWorkdir('/a', '/b/'), '/b');
    assert.throws(() => resolveWorkdir('/a', ''), /cannot normalize nothing/);
    assert.equal(nopHistory(first('RUN true')), undefined);
    assert.equal(nopHistory(first('COPY a b')), undefined);
  });

  it('writes COPY/ADD and RUN texts as dockerd', () => {
    const sum = 'file:690f63c33926bc3c6299be5a99f5899b6d938c79652882e6ba63ea1f755d0307';
    assert.equal(copyHistory('copy', sum, '/b'), `/bin/sh -c #(nop) COPY ${sum} in /b `);
    assert.equal(copyHistory('add', sum, '/dst/'), `/bin/sh -c #(nop) ADD ${sum} in /dst/ `);
    assert.equal(runHistoryCmd(['/bin/sh', '-c', 'true'], ['b=3']).join(' '), '|1 b=3 /bin/sh -c true');
    assert.deepEqual(runHistoryCmd(['/bin/sh', '-c', 'true'], ['z=1', 'a=2']), [
      '|2',
      'a=2',
      'z=1',
      '/bin/sh',
      '-c',
      'true',
    ]);
    assert.deepEqual(runHistoryCmd(['true'], []), ['true']);
  });

  it('formats durations and health checks as Go', () => {
    assert.deepEqual([0, 1, 1500, 1e6, 1.5e9, 90e9, 3600e9, 3661.5e9, 10e9, 100e9].map(goDuration), [
      '0s',
      '1ns',
      '1.5µs',
      '1ms',
      '1.5s',
      '1m30s',
      '1h0m0s',
      '1h1m1.5s',
      '10s',
      '1m40s',
    ]);
    assert.equal(healthText({ Test: ['NONE'] }), `&{["NONE"] "0s" "0s" "0s" '\\x00'}`);
  });
});

describe('resolveCmdLine and runCommand', () => {
  const run = (text: string) => {
    const i = first(text);
    assert.ok(i.kind === 'run');
    return i;
  };

  it('prepends the shell to the shell form only', () => {
    assert.deepEqual(resolveCmdLine(run('RUN echo  hi')), ['/bin/sh', '-c', 'echo  hi']);
    assert.deepEqual(resolveCmdLine(run('RUN ["echo", "hi"]'), ['/bin/bash', '-c']), ['echo', 'hi']);
    assert.deepEqual(runCommand(run('RUN echo hi'), ['/bin/bash', '-c']), {
      argv: ['/bin/bash', '-c', 'echo hi'],
    });
  });

  it('runs heredocs as buildkit does', () => {
    assert.deepEqual(runCommand(run('RUN <<EOF\necho a\necho b\nEOF')), {
      argv: ['/bin/sh', '-c', 'echo a\necho b\n'],
    });
    assert.deepEqual(runCommand(run('RUN <<-EOF\n\techo a\n\tEOF')), { argv: ['/bin/sh', '-c', 'echo a\n'] });
    assert.deepEqual(runCommand(run('RUN <<EOF\n#!/bin/ash\necho a\nEOF')), {
      argv: ['/bin/sh', '-c', '/dev/pipes/EOF'],
      script: { path: '/dev/pipes/EOF', content: '#!/bin/ash\necho a\n' },
    });
    assert.deepEqual(runCommand(run('RUN cat <<A > /a && cat <<B\none\nA\ntwo\nB')), {
      argv: ['/bin/sh', '-c', 'cat <<A > /a && cat <<B\none\nA\ntwo\nB'],
    });
  });
});

describe('parseOnbuildTriggers', () => {
  it('parses the triggers a base image carries, heredocs included', () => {
    const trigger = (first('ONBUILD RUN <<EOF\necho hi\nEOF') as { expression: string }).expression;
    const [a, b] = parseOnbuildTriggers(['COPY . /app', trigger]);
    assert.ok(a?.kind === 'copy' && b?.kind === 'run');
    assert.deepEqual([a.sources, a.dest], [['.'], '/app']);
    assert.deepEqual(b.heredocs, [{ name: 'EOF', content: 'echo hi\n', expand: true }]);
    assert.throws(
      () => parseOnbuildTriggers(['ONBUILD RUN x']),
      /Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed/,
    );
    assert.throws(() => parseOnbuildTriggers(['FROM x']), /FROM isn't allowed as an ONBUILD trigger/);
    assert.throws(() => parseOnbuildTriggers(['BOGUS x']), /unknown instruction: BOGUS/);
  });
});
