import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Instruction } from '../../../../../src/engine/build/build.types.js';
import { isBuiltinSyntax, parseBuildDockerfile } from '../../../../../src/engine/build/dockerfile/index.js';

const only = (text: string): Instruction => {
  const parsed = parseBuildDockerfile(`FROM busybox\n${text}`);
  const stage = parsed.stages[0];
  assert.ok(stage);
  assert.equal(stage.instructions.length, 1);
  return stage.instructions[0] as Instruction;
};

const fails = (text: string, message: string) =>
  assert.throws(
    () => parseBuildDockerfile(text),
    (err: Error & { kind?: string }) => {
      assert.equal(err.message, message);
      assert.equal(err.kind, 'InvalidParameter');
      return true;
    },
  );

describe('parseBuildDockerfile', () => {
  it('splits stages, keeps meta ARGs and lower-cases stage names', () => {
    const p = parseBuildDockerfile(
      'ARG B=busybox\nARG V\nFROM $B AS Base\nRUN true\nFROM --platform=linux/amd64 base\nCMD ["sh"]\n',
    );
    assert.deepEqual(p.metaArgs, [{ name: 'B', value: 'busybox' }, { name: 'V' }]);
    assert.equal(p.metaArgInstructions?.length, 2);
    assert.equal(p.stages.length, 2);
    assert.deepEqual(
      p.stages.map((s) => [s.index, s.name, s.base, s.platform, s.line, s.original]),
      [
        [0, 'base', '$B', undefined, 3, 'FROM $B AS Base'],
        [1, undefined, 'base', 'linux/amd64', 5, 'FROM --platform=linux/amd64 base'],
      ],
    );
    assert.deepEqual(p.stages[1]?.instructions[0], {
      kind: 'cmd',
      line: 6,
      endLine: 6,
      original: 'CMD ["sh"]',
      cmdLine: ['sh'],
      prependShell: false,
    });
    assert.equal(p.escapeToken, '\\');
    assert.equal(p.syntax, undefined);
  });

  it('keeps the text dockerd 20.10 prints after Step N/M (trimmed, continuations joined)', () => {
    const p = parseBuildDockerfile(
      'ARG A=1\nFROM busybox AS x  \n  RUN   echo  a \\\n  # inner\n   b\t\\\n c\nCMD   ["sh",  "-c"]   \nRUN echo \\',
    );
    assert.deepEqual(
      p.metaArgInstructions?.map((i) => i.original),
      ['ARG A=1'],
    );
    assert.equal(p.stages[0]?.original, 'FROM busybox AS x');
    assert.deepEqual(
      p.stages[0]?.instructions.map((i) => i.original),
      ['RUN   echo  a    b\t c', 'CMD   ["sh",  "-c"]', 'RUN echo'],
    );
  });

  it('reads the escape and syntax directives', () => {
    const p = parseBuildDockerfile(
      '# syntax=docker/dockerfile:1\n# escape=`\nFROM busybox\nRUN echo a `\n  b\n',
    );
    assert.equal(p.syntax, 'docker/dockerfile:1');
    assert.equal(p.escapeToken, '`');
    const run = p.stages[0]?.instructions[0];
    assert.equal(run?.original, 'RUN echo a   b');
    assert.deepEqual([run?.line, run?.endLine], [4, 5]);
    for (const s of [
      'docker/dockerfile:1',
      'docker/dockerfile:1.4',
      'docker.io/docker/dockerfile:1-labs',
      'docker/dockerfile',
    ]) {
      assert.ok(isBuiltinSyntax(s), s);
    }
    assert.ok(isBuiltinSyntax(`docker/dockerfile:1.7@sha256:${'a'.repeat(64)}`));
    for (const s of ['example.com/my/frontend:1', 'docker/dockerfile:2', 'tonistiigi/dockerfile']) {
      assert.ok(!isBuiltinSyntax(s), s);
    }
    fails(
      '# escape=x\nFROM busybox\n',
      "dockerfile parse error line 1: invalid escape token 'x' does not match ` or \\",
    );
  });

  it('joins continuations, skips comments, warns about empty continuation lines as dockerd', () => {
    const p = parseBuildDockerfile('FROM busybox\nRUN echo \\\n# note\n\n  hi\nRUN true\n');
    const [run, next] = p.stages[0]?.instructions ?? [];
    assert.equal(run?.original, 'RUN echo   hi');
    assert.deepEqual([run?.line, run?.endLine, next?.line], [2, 5, 6]);
    assert.deepEqual(p.warnings, [
      '[WARNING]: Empty continuation line found in:\n    RUN echo   hi',
      '[WARNING]: Empty continuation lines will become errors in a future release.',
    ]);
    assert.deepEqual(parseBuildDockerfile('FROM busybox\n').warnings, []);
  });

  it('parses every metadata instruction', () => {
    assert.deepEqual(only('ENV A=1 B="x y"'), {
      kind: 'env',
      line: 2,
      endLine: 2,
      original: 'ENV A=1 B="x y"',
      pairs: [
        ['A', '1'],
        ['B', '"x y"'],
      ],
    });
    assert.deepEqual((only('ENV A b c') as { pairs: unknown }).pairs, [['A', 'b c']]);
    assert.deepEqual((only('LABEL a=b "c d"=e') as { pairs: unknown }).pairs, [
      ['a', 'b'],
      ['"c d"', 'e'],
    ]);
    assert.deepEqual((only('MAINTAINER me <m@x>') as { value: unknown }).value, 'me <m@x>');
    assert.deepEqual((only('EXPOSE 80 53/udp') as { ports: unknown }).ports, ['53/udp', '80']);
    assert.deepEqual((only('ARG a b=2 c=') as { args: unknown }).args, [
      { name: 'a' },
      { name: 'b', value: '2' },
      { name: 'c', value: '' },
    ]);
    assert.deepEqual((only('WORKDIR /a b') as { value: unknown }).value, '/a b');
    assert.deepEqual((only('USER 1:2') as { value: unknown }).value, '1:2');
    assert.deepEqual((only('STOPSIGNAL SIGKILL') as { value: unknown }).value, 'SIGKILL');
    assert.deepEqual((only('VOLUME /v /w') as { volumes: unknown }).volumes, ['/v', '/w']);
    assert.deepEqual((only('VOLUME ["/v w"]') as { volumes: unknown }).volumes, ['/v w']);
    assert.deepEqual((only('SHELL ["/bin/bash", "-c"]') as { shell: unknown }).shell, ['/bin/bash', '-c']);
    const ep = only('ENTRYPOINT echo hi') as { cmdLine: unknown; prependShell: unknown };
    assert.deepEqual([ep.cmdLine, ep.prependShell], [['echo hi'], true]);
    assert.deepEqual((only('HEALTHCHECK --interval=5s --retries=3 CMD true') as { health: unknown }).health, {
      Test: ['CMD-SHELL', 'true'],
      Interval: 5e9,
      Retries: 3,
    });
    assert.deepEqual((only('HEALTHCHECK NONE') as { health: unknown }).health, { Test: ['NONE'] });
    assert.deepEqual((only('ONBUILD  RUN echo hi') as { expression: unknown }).expression, 'RUN echo hi');
  });

  it('parses RUN in both forms, with mounts and network', () => {
    assert.deepEqual(only('RUN ["echo", "a b"]'), {
      kind: 'run',
      line: 2,
      endLine: 2,
      original: 'RUN ["echo", "a b"]',
      cmdLine: ['echo', 'a b'],
      prependShell: false,
      heredocs: [],
      mounts: [],
    });
    const run = only(
      'RUN --mount=type=cache,target=/c,id=x,sharing=locked,mode=0755,uid=1,gid=2 --mount=type=bind,src=a,dst=/b,from=base,rw --mount=type=tmpfs,destination=/t,size=64m --mount=target=/r --network=none echo  hi',
    );
    assert.equal(run.kind, 'run');
    if (run.kind !== 'run') return;
    assert.deepEqual(run.cmdLine, ['echo  hi']);
    assert.equal(run.network, 'none');
    assert.deepEqual(run.mounts, [
      {
        type: 'cache',
        target: '/c',
        readonly: false,
        id: 'x',
        sharing: 'locked',
        mode: 0o755,
        uid: 1,
        gid: 2,
      },
      { type: 'bind', target: '/b', source: 'a', from: 'base', readonly: false },
      { type: 'tmpfs', target: '/t', readonly: false, size: 64 * 1024 * 1024 },
      { type: 'bind', target: '/r', readonly: true },
    ]);
  });

  it('parses COPY and ADD flags', () => {
    const copy = only(
      'COPY --from=base --chown=1:2 --chmod=644 --link --parents --exclude=*.md --exclude=x a b* /dst/',
    );
    assert.deepEqual(copy, {
      kind: 'copy',
      line: 2,
      endLine: 2,
      original:
        'COPY --from=base --chown=1:2 --chmod=644 --link --parents --exclude=*.md --exclude=x a b* /dst/',
      sources: ['a', 'b*'],
      dest: '/dst/',
      heredocs: [],
      from: 'base',
      chown: '1:2',
      chmod: '644',
      link: true,
      parents: true,
      exclude: ['*.md', 'x'],
    });
    const empty = only('COPY --from= --chown= --chmod= a b');
    assert.ok(empty.kind === 'copy');
    assert.deepEqual([empty.from, empty.chown, empty.chmod], [undefined, undefined, undefined]);
    const add = only('ADD --checksum=sha256:abc --keep-git-dir=true --link=false ["a b", "/c d"]');
    assert.equal(add.kind, 'add');
    if (add.kind !== 'add') return;
    assert.deepEqual([add.sources, add.dest, add.checksum, add.link], [['a b'], '/c d', 'sha256:abc', false]);
  });

  it('reads heredocs of RUN, COPY and ADD', () => {
    const p = parseBuildDockerfile(
      'FROM busybox\nRUN <<EOF\necho $A\n\techo b\nEOF\nRUN cat <<-"A" <<B > /f\n\tone $X\n\tA\ntwo\nB\nCOPY <<X /dst\ncontent\nX\nRUN echo done\n',
    );
    const [r1, r2, c, r3] = p.stages[0]?.instructions ?? [];
    assert.ok(r1?.kind === 'run' && r2?.kind === 'run' && c?.kind === 'copy' && r3?.kind === 'run');
    assert.deepEqual(
      [r1.cmdLine, r1.heredocs, r1.line, r1.endLine],
      [['<<EOF'], [{ name: 'EOF', content: 'echo $A\n\techo b\n', expand: true }], 2, 5],
    );
    assert.deepEqual(r2.heredocs, [
      { name: 'A', content: 'one $X\n', expand: false },
      { name: 'B', content: 'two\n', expand: true },
    ]);
    assert.deepEqual([r2.line, r2.endLine], [6, 10]);
    assert.deepEqual(
      [c.sources, c.dest, c.heredocs],
      [['<<X'], '/dst', [{ name: 'X', content: 'content\n', expand: true }]],
    );
    assert.deepEqual([r3.line, r3.original], [14, 'RUN echo done']);
    // The exec form and other instructions have no heredocs.
    const exec = only('RUN ["cat", "<<EOF"]');
    assert.ok(exec.kind === 'run' && exec.heredocs.length === 0);
    fails('FROM busybox\nRUN <<EOF\necho\n', 'dockerfile parse error line 2: unterminated heredoc');
  });

  it('keeps an ONBUILD trigger with its heredoc whole', () => {
    const ob = only('ONBUILD RUN <<EOF\necho hi\nEOF');
    assert.deepEqual((ob as { expression: unknown }).expression, 'RUN <<EOF\necho hi\nEOF');
    assert.deepEqual(
      (only('ONBUILD RUN ["cat", "<<EOF"]') as { expression: unknown }).expression,
      'RUN ["cat", "<<EOF"]',
    );
    const again = only((ob as { expression: string }).expression);
    assert.ok(again.kind === 'run');
    assert.deepEqual(again.heredocs, [{ name: 'EOF', content: 'echo hi\n', expand: true }]);
  });

  it('refuses bad Dockerfiles with dockerd 20.10 words and the line', () => {
    // Recorded from dockerd 20.10's classic builder (`docker build` with DOCKER_BUILDKIT=0).
    fails('FROM busybox\nRUN true\nFOO bar\n', 'dockerfile parse error line 3: unknown instruction: FOO');
    fails('RUN true\n', 'no build stage in current context');
    fails('FROM busybox\nCOPY --foo=x a b\n', 'dockerfile parse error line 2: Unknown flag: foo');
    fails(
      'FROM busybox\nCOPY a\n',
      'dockerfile parse error line 2: COPY requires at least two arguments, but only one was provided. Destination could not be determined',
    );
    fails(
      'FROM busybox\nONBUILD ONBUILD RUN x\n',
      "dockerfile parse error line 2: Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed",
    );
    fails(
      'FROM busybox\nONBUILD FROM x\n',
      "dockerfile parse error line 2: FROM isn't allowed as an ONBUILD trigger",
    );
    fails(
      'FROM busybox\nONBUILD MAINTAINER x\n',
      "dockerfile parse error line 2: MAINTAINER isn't allowed as an ONBUILD trigger",
    );
    fails(
      'FROM busybox AS 1x\n',
      `dockerfile parse error line 1: invalid name for build stage: "1x", name can't start with a number or contain symbols`,
    );
    fails(
      'FROM busybox a b c\n',
      'dockerfile parse error line 1: FROM requires either one or three arguments',
    );
    fails('FROM busybox\nARG\n', 'dockerfile parse error line 2: ARG requires at least one argument');
    fails(
      'FROM busybox\nSHELL sh -c\n',
      'dockerfile parse error line 2: SHELL requires the arguments to be in JSON form',
    );
    fails('FROM busybox\nSHELL []\n', 'dockerfile parse error line 2: SHELL requires at least one argument');
    fails(
      'FROM busybox\nMAINTAINER\n',
      'dockerfile parse error line 2: MAINTAINER requires exactly one argument',
    );
    fails(
      'FROM busybox\nCOPY --chown a b\n',
      'dockerfile parse error line 2: Missing a value on flag: chown',
    );
    fails('FROM busybox\nENV\n', 'dockerfile parse error line 2: ENV requires at least one argument');
    fails(
      'FROM busybox\n\nWORKDIR\n',
      'dockerfile parse error line 3: WORKDIR requires exactly one argument',
    );
    fails('FROM busybox\nEXPOSE\n', 'dockerfile parse error line 2: EXPOSE requires at least one argument');
    fails(
      'FROM busybox\nCOPY --from=a --from=b x y\n',
      'dockerfile parse error line 2: Duplicate flag specified: from',
    );
    fails('FROM busybox\nADD --from=a x y\n', 'dockerfile parse error line 2: Unknown flag: from');
    fails(
      'FROM busybox\nCOPY --link=maybe x y\n',
      'dockerfile parse error line 2: Expecting boolean value for flag link, not: maybe',
    );
    fails(
      'FROM busybox\nENV a=b c\n',
      `dockerfile parse error line 2: Syntax error - can't find = in "c". Must be of the form: name=value`,
    );
    fails(
      'FROM busybox AS zz\nFROM busybox AS ZZ\n',
      'dockerfile parse error line 2: zz stage name already used',
    );
    fails('ARG a\n', 'dockerfile contains no stages to build');
    fails('# just a comment\n', 'file with no instructions');
  });

  it('refuses bad mounts and networks with buildkit words', () => {
    const bad: Array<[string, string]> = [
      ['--mount=type=foo,target=/x', 'unsupported mount type "foo"'],
      ['--mount=type=cache', 'mount type cache requires a target'],
      ['--mount=target=/x,mode=0755', 'mode not allowed for "bind" type mounts'],
      ['--mount=type=cache,target=/x,mode=9', 'invalid value 9 for mode'],
      ['--mount=type=cache,target=/x,uid=a', 'invalid value a for uid'],
      ['--mount=type=cache,target=/x,sharing=all', 'unsupported sharing value "all"'],
      ['--mount=type=bind,target=/x,sharing=shared', 'invalid cache sharing set for bind mount'],
      ['--mount=type=bind,target=/x,size=1', "unexpected key 'size' for mount type 'bind'"],
      ['--mount=type=tmpfs,target=/x,size=lots', 'invalid value for size: lots'],
      ['--mount=target=/x,ro=maybe', 'invalid value for ro: maybe'],
      ['--mount=target=/x,bogus=1', "unexpected key 'bogus' in 'bogus=1'"],
      ['--mount=target=/x,bogus', "invalid field 'bogus' must be a key=value pair"],
      ['--mount=type=secret', 'invalid secret mount. one of source, target required'],
      ['--network=bridge', 'unsupported network mode "bridge"'],
      ['--mount', 'Missing a value on flag: mount'],
    ];
    for (const [flag, message] of bad) {
      fails(`FROM busybox\nRUN ${flag} true\n`, `dockerfile parse error line 2: ${message}`);
    }
  });
});
