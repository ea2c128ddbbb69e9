import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  applyChanges,
  dockerfileLines,
  parseGoDuration,
  processWords,
} from '../../../../src/engine/images/changes.js';

describe('import/commit changes', () => {
  it('CMD and ENTRYPOINT in exec and shell form', () => {
    assert.deepEqual(applyChanges({}, ['CMD ["a","b"]']).Cmd, ['a', 'b']);
    assert.deepEqual(applyChanges({}, ['cmd echo $HOME']).Cmd, ['/bin/sh', '-c', 'echo $HOME']);
    const c = applyChanges({}, ['CMD ["x"]', 'ENTRYPOINT ["/init"]']);
    assert.deepEqual(c.Entrypoint, ['/init']);
    assert.deepEqual(c.Cmd, ['x'], 'a CMD given before ENTRYPOINT stays');
    const e = applyChanges({ Cmd: ['old'] }, ['ENTRYPOINT top -b']);
    assert.deepEqual(e.Entrypoint, ['/bin/sh', '-c', 'top -b']);
    assert.equal(e.Cmd, null, 'ENTRYPOINT without CMD resets the inherited CMD');
  });

  it('ENV and LABEL in both forms, with quotes and substitution', () => {
    // Substitution sees the environment before the instruction, as in a Dockerfile.
    const c = applyChanges({}, [
      'ENV A=1 B="two words" C=${A}x',
      'ENV D=${A}y',
      'ENV LEGACY some value',
      'ENV A=3',
    ]);
    assert.deepEqual(c.Env, ['A=3', 'B=two words', 'C=x', 'D=1y', 'LEGACY=some value']);
    const l = applyChanges({}, ['LABEL a=b "c d"=e', 'LABEL version 1.0']);
    assert.deepEqual(l.Labels, { a: 'b', 'c d': 'e', version: '1.0' });
    assert.throws(() => applyChanges({}, ['ENV']), /requires at least one argument/);
  });

  it('EXPOSE, VOLUME, USER, WORKDIR, STOPSIGNAL, ONBUILD, HEALTHCHECK', () => {
    const c = applyChanges({}, [
      'EXPOSE 80 53/udp 8000-8001',
      'VOLUME ["/a", "/b"]',
      'VOLUME /c /d',
      'USER 1000:1000',
      'WORKDIR /srv',
      'WORKDIR app',
      'STOPSIGNAL SIGQUIT',
      'ONBUILD RUN make',
      'HEALTHCHECK --interval=5s --retries=3 CMD curl -f http://localhost/',
    ]);
    assert.deepEqual(c.ExposedPorts, { '80/tcp': {}, '53/udp': {}, '8000/tcp': {}, '8001/tcp': {} });
    assert.deepEqual(c.Volumes, { '/a': {}, '/b': {}, '/c': {}, '/d': {} });
    assert.equal(c.User, '1000:1000');
    assert.equal(c.WorkingDir, '/srv/app');
    assert.equal(c.StopSignal, 'SIGQUIT');
    assert.deepEqual(c.OnBuild, ['RUN make']);
    assert.deepEqual(c.Healthcheck, {
      Test: ['CMD-SHELL', 'curl -f http://localhost/'],
      Interval: 5e9,
      Retries: 3,
    });
    assert.deepEqual(applyChanges({}, ['HEALTHCHECK NONE']).Healthcheck, { Test: ['NONE'] });
    assert.deepEqual(applyChanges({}, ['HEALTHCHECK CMD ["true"]']).Healthcheck, { Test: ['CMD', 'true'] });
  });

  it('refuses what dockerd refuses', () => {
    assert.throws(() => applyChanges({}, ['RUN true']), { message: 'run is not a valid change command' });
    assert.throws(() => applyChanges({}, ['FROM busybox']), {
      message: 'from is not a valid change command',
    });
    assert.throws(() => applyChanges({}, ['BOGUS x']), /unknown instruction: BOGUS/);
    assert.throws(() => applyChanges({}, ['EXPOSE abc']), /Invalid containerPort: abc/);
    assert.throws(() => applyChanges({}, ['STOPSIGNAL SIGNOPE']), /Invalid signal/);
    assert.throws(() => applyChanges({}, ['ONBUILD ONBUILD RUN x']), /isn't allowed/);
    assert.throws(() => applyChanges({}, ['HEALTHCHECK --interval=xyz CMD true']), /invalid duration/);
    for (const bad of ['RUN true', 'EXPOSE abc']) {
      try {
        applyChanges({}, [bad]);
      } catch (err) {
        assert.equal((err as { kind: string }).kind, 'InvalidParameter');
      }
    }
  });

  it('lexes lines and words like the Dockerfile parser', () => {
    assert.deepEqual(dockerfileLines('# comment\nENV a=1 \\\n  b=2\n\nCMD x'), ['ENV a=1   b=2', 'CMD x']);
    assert.deepEqual(processWords(`a 'b c' "d $X" \\e`, ['X=1']), ['a', 'b c', 'd 1', 'e']);
    assert.deepEqual(processWords('${U:-dflt} ${X:+alt}', ['X=1']), ['dflt', 'alt']);
    assert.equal(parseGoDuration('1m30s'), 90e9);
    assert.equal(parseGoDuration('250ms'), 250e6);
  });
});
