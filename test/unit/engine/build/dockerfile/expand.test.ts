import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Instruction } from '../../../../../src/engine/build/build.types.js';
import {
  expandFrom,
  expandHeredoc,
  expandInstruction,
  expandWord,
  expandWords,
  parseBuildDockerfile,
} from '../../../../../src/engine/build/dockerfile/index.js';

const ENV = ['V=foo/bar/baz.tar.gz', 'E=', 'S=aXbXc', 'W=a b'];
const x = (word: string): string => expandWord(word, ENV, '\\');

const first = (text: string): Instruction => {
  const i = parseBuildDockerfile(`FROM busybox\n${text}`).stages[0]?.instructions[0];
  assert.ok(i);
  return i;
};

describe('expandWord', () => {
  it('substitutes the classic forms', () => {
    assert.equal(x('$V-${E}x'), 'foo/bar/baz.tar.gz-x');
    assert.equal(x('${U:-def} ${E:-def} ${E-def} ${U-def}'), 'def def  def');
    assert.equal(x('${V:+set}|${E:+set}|${E+set}|${U+set}'), 'set||set|');
    assert.equal(x('\'$V\' "$S" \\$S'), '$V aXbXc $S');
    assert.equal(x('$'), '$');
    assert.throws(() => x('${U:?need U}'), /failed to process "\$\{U:\?need U\}": U: need U/);
    assert.throws(() => x('${E:?}'), /E: is not allowed to be empty/);
    assert.throws(() => x('${U?}'), /U: is not allowed to be unset/);
    assert.equal(x('${E?}'), '');
    assert.throws(() => x('${V'), /missing ':' in substitution/);
    assert.throws(() => x('${V:-x'), /syntax error: missing '}'/);
    assert.throws(() => x('${V/x}'), /syntax error: missing '}'/);
    assert.throws(() => x('${}'), /bad substitution/);
  });

  it('trims and replaces with glob patterns as buildkit (same answers as bash)', () => {
    const cases: Array<[string, string]> = [
      ['${V#*/}', 'bar/baz.tar.gz'],
      ['${V##*/}', 'baz.tar.gz'],
      ['${V%.*}', 'foo/bar/baz.tar'],
      ['${V%%.*}', 'foo/bar/baz'],
      ['${V#f?o}', '/bar/baz.tar.gz'],
      ['${V%[a-z]z}', 'foo/bar/baz.tar.'],
      ['${V##*[/.]}', 'gz'],
      ['${V#\\*}', 'foo/bar/baz.tar.gz'],
      ['${V%.tar*}', 'foo/bar/baz'],
      ['${U#x}', ''],
      ['${V/a/A}', 'foo/bAr/baz.tar.gz'],
      ['${V//a/A}', 'foo/bAr/bAz.tAr.gz'],
      ['${S//X/-}', 'a-b-c'],
      ['${V//[ab]/_}', 'foo/__r/__z.t_r.gz'],
      ['${V/b*z/Q}', 'foo/Q'],
      ['${S//?/.}', '.....'],
      ['${V/\\//_}', 'foo_bar/baz.tar.gz'],
      ['${S/[!a]/-}', 'a-bXc'],
      ['${V//*/x}', 'x'],
      ['${S//[!X]/_}', '_X_X_'],
      ['${S//X?/-}', 'a--'],
      ['${V/*a/Q}', 'Qr.gz'],
      ['${V##*}', ''],
      ['${V%*}', 'foo/bar/baz.tar.gz'],
      ['${V//[a-c]*[x-z]/#}', 'foo/#'],
    ];
    for (const [word, want] of cases) assert.equal(x(word), want, word);
    // Patterns that are no regular expression are a clear error, never a crash.
    assert.throws(() => x('${V/[z-a]/x}'), /invalid pattern \(\[z-a\]\) in substitution/);
    assert.equal(x('${V%%[a-}'), 'foo/bar/baz.tar.gz');
    assert.equal(x('${V#foo/-}'), 'foo/bar/baz.tar.gz');
    // Matching is linear per position: a pattern cannot stall the engine.
    const long = ['L=' + 'a'.repeat(20000)];
    assert.equal(expandWord('${L//*a*a*a*a*a*a*b/x}', long, '\\').length, 20000);
    assert.equal(expandWord('${L##*a*a*a*a*a*b}', long, '\\').length, 20000);
  });

  it('lets the first definition of a name win (ENV before ARG)', () => {
    assert.equal(expandWord('$A', ['A=env', 'A=arg'], '\\'), 'env');
  });

  it('splits words for EXPOSE-like use, with the escape token of the Dockerfile', () => {
    assert.deepEqual(expandWords('$W "c d" e', ENV, '\\'), ['a', 'b', 'c d', 'e']);
    assert.equal(expandWord('`$V', ENV, '`'), '$V');
  });

  it('expands heredoc bodies, keeping quotes', () => {
    assert.equal(expandHeredoc('say "$S" \'${E:-x}\' \\$S\n', ENV, '\\'), 'say "aXbXc" \'x\' $S\n');
  });
});

describe('expandInstruction', () => {
  it('expands the words dockerd expands', () => {
    const env = ['A=1', 'P=80 443', 'D=/dst', 'N=name'];
    const ex = (text: string) => expandInstruction(first(text), env, '\\');
    assert.deepEqual((ex('ENV $N=$A B="$A x"') as { pairs: unknown }).pairs, [
      ['name', '1'],
      ['B', '1 x'],
    ]);
    assert.deepEqual((ex('LABEL "$N"=$A') as { pairs: unknown }).pairs, [['name', '1']]);
    assert.deepEqual((ex('ARG X=$A Y') as { args: unknown }).args, [
      { name: 'X', value: '1' },
      { name: 'Y' },
    ]);
    assert.deepEqual((ex('EXPOSE $P 53/udp') as { ports: unknown }).ports, ['80', '443', '53/udp']);
    assert.equal((ex('WORKDIR $D/w') as { value: unknown }).value, '/dst/w');
    assert.equal((ex('USER ${N}:$A') as { value: unknown }).value, 'name:1');
    assert.equal((ex('STOPSIGNAL SIG$N') as { value: unknown }).value, 'SIGname');
    assert.deepEqual((ex('VOLUME $D /v$A') as { volumes: unknown }).volumes, ['/dst', '/v1']);
    assert.throws(() => ex('VOLUME ""'), /VOLUME specified can not be an empty string/);
    const copy = ex('COPY --chown=$A:$A --from=$N --chmod=75$A src$A <<EOF $D/\nx$A\nEOF');
    assert.ok(copy.kind === 'copy');
    assert.deepEqual(
      [copy.sources, copy.dest, copy.chown, copy.from, copy.chmod, copy.heredocs[0]?.content],
      [['src1', '<<EOF'], '/dst/', '1:1', 'name', '751', 'x1\n'],
    );
    const quoted = ex('COPY <<"EOF" /f\nx$A\nEOF');
    assert.ok(quoted.kind === 'copy');
    assert.equal(quoted.heredocs[0]?.content, 'x$A\n');
    const run = ex('RUN --mount=type=cache,target=$D,id=$N echo $A');
    assert.ok(run.kind === 'run');
    assert.deepEqual([run.cmdLine, run.mounts[0]?.target, run.mounts[0]?.id], [['echo $A'], '/dst', 'name']);
    assert.deepEqual((ex('CMD echo $A') as { cmdLine: unknown }).cmdLine, ['echo $A']);
  });

  it('expands FROM with the meta ARGs', () => {
    const p = parseBuildDockerfile('ARG B=busybox\nFROM --platform=$P ${B}:1\n');
    const stage = p.stages[0];
    assert.ok(stage);
    assert.deepEqual(expandFrom(stage, ['B=busybox', 'P=linux/amd64'], '\\'), {
      base: 'busybox:1',
      platform: 'linux/amd64',
    });
    const blank = parseBuildDockerfile('FROM $NONE\n').stages[0];
    assert.ok(blank);
    assert.throws(() => expandFrom(blank, [], '\\'), /base name \(\$NONE\) should not be blank/);
  });
});
