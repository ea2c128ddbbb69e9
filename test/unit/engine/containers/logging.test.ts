import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostConfig } from '../../../../src/common/docker-types.js';
import { Container } from '../../../../src/engine/containers/container.js';
import { detailsPrefix } from '../../../../src/engine/containers/io.js';
import { goRegExp, logAttributes, logLimits, writesLog } from '../../../../src/engine/containers/logging.js';
import type { ContainerRecord } from '../../../../src/engine/containers/types.js';

function container(hostConfig: HostConfig, config: Partial<ContainerRecord['Config']> = {}): Container {
  const record = { ID: 'c1', Name: '/c1', Config: config, State: {} } as unknown as ContainerRecord;
  return new Container(record, hostConfig, () => undefined);
}

describe('container logging options', () => {
  it('json-file attrs: named and matching labels and env values, as moby’s ExtraAttributes', () => {
    const c = container(
      {
        LogConfig: {
          Type: 'json-file',
          Config: { labels: 'team,missing', 'labels-regex': '^com\\.', env: 'FOO', 'env-regex': '(?i)^bar' },
        },
      },
      {
        Labels: { team: 'a', other: 'x', 'com.example': 'y' },
        Env: ['FOO=1=2', 'Bar_X=b', 'PLAIN', 'NOPE=0'],
      },
    );
    assert.deepEqual(logAttributes(c), { team: 'a', 'com.example': 'y', FOO: '1=2', Bar_X: 'b' });
    assert.equal(
      logAttributes(container({ LogConfig: { Type: 'json-file', Config: {} } }, { Labels: { a: 'b' } })),
      undefined,
    );
    assert.equal(
      logAttributes(
        container({ LogConfig: { Type: 'local', Config: { labels: 'a' } } }, { Labels: { a: 'b' } }),
      ),
      undefined,
    );
  });

  it('none writes no log; limits per type', () => {
    assert.equal(writesLog(container({ LogConfig: { Type: 'none', Config: {} } })), false);
    assert.equal(writesLog(container({})), true);
    assert.deepEqual(
      logLimits(container({ LogConfig: { Type: 'json-file', Config: { 'max-size': '2k' } } })),
      {
        maxSize: 2000,
        maxFiles: 1,
        compress: false,
      },
    );
  });

  it('Go regular expressions: flags and named groups', () => {
    assert.ok(goRegExp('(?i)^abc').test('ABC'));
    assert.ok(goRegExp('(?P<x>a)b').test('ab'));
    assert.throws(() => goRegExp('['), /error parsing regexp/);
  });

  it('details put the attributes before a message as dockerd does', () => {
    assert.equal(detailsPrefix(undefined), ' ');
    assert.equal(detailsPrefix({ team: 'a', FOO: 'bar' }), 'FOO=bar,team=a ');
    assert.equal(detailsPrefix({ 'a b': 'x/y&z=é~' }), 'a+b=x%2Fy%26z%3D%C3%A9~ ');
  });
});
