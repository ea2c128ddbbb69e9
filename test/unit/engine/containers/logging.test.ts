import assert from 'node:assert/strict';
import { appendFile, mkdir, readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { HostConfig } from '../../../../src/common/docker-types.js';
import { userGoRegExp as goRegExp } from '../../../../src/common/go-regexp.js';
import { Container } from '../../../../src/engine/containers/core/container.js';
import type { CreateRequest } from '../../../../src/engine/containers/core/create.js';
import type { ContainerRecord } from '../../../../src/engine/containers/core/record.types.js';
import { logAttributes, logLimits, writesLog } from '../../../../src/engine/containers/io/log-copiers.js';
import { detailsPrefix } from '../../../../src/engine/containers/io/logs.js';
import { CREATE_OPTIONS } from '../../../helpers/create-options.js';
import { type Harness, harness } from './fakes.js';

function container(hostConfig: HostConfig, config: Partial<ContainerRecord['Config']> = {}): Container {
  const record = { ID: 'c1', Name: '/c1', Config: config, State: {} } as unknown as ContainerRecord;
  return new Container(record, hostConfig);
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

describe('container logs through the service (fake runtime)', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.cleanup();
  });
  const req = (hostConfig: CreateRequest['hostConfig'] = {}): CreateRequest => ({
    config: { Image: 'busybox', Cmd: ['true'] },
    hostConfig,
    networkingConfig: {},
    options: CREATE_OPTIONS,
  });
  const rec = (stream: string, tag: string, text: string) =>
    `2026-11-21T10:00:00.000000001+00:00 ${stream} ${tag} ${text}\n`;

  it('the monitor output is in the json-file log when wait answers', async () => {
    const { Id } = await h.service.create(req());
    const out = h.runtime.monitorLogPath(Id);
    await mkdir(dirname(out), { recursive: true });
    await appendFile(out, '');
    await h.service.start(Id);
    const wait = await h.service.wait(Id, 'next-exit');
    // written just before the exit: the copier has not seen it yet
    await appendFile(out, rec('stdout', 'F', 'hello') + rec('stderr', 'P', 'no newline'));
    h.runtime.exit(Id, 0);
    await wait();
    const logPath = (await h.service.inspect(Id)).LogPath as string;
    assert.equal(
      await readFile(logPath, 'utf8'),
      '{"log":"hello\\n","stream":"stdout","time":"2026-11-21T10:00:00.000000001Z"}\n' +
        '{"log":"no newline","stream":"stderr","time":"2026-11-21T10:00:00.000000001Z"}\n',
    );
    await h.service.remove(Id, {});
  });

  it('LogConfig none: no log file, logs answer 501', async () => {
    const { Id } = await h.service.create(req({ LogConfig: { Type: 'none', Config: {} } }));
    await h.service.start(Id);
    assert.equal(h.runtime.procs.get(Id)?.opts.logPath, undefined);
    const wait = await h.service.wait(Id, 'next-exit');
    h.runtime.exit(Id, 0);
    await wait();
    const view = await h.service.inspect(Id);
    assert.equal(view.LogPath, '');
    await assert.rejects(stat(`${dirname(h.runtime.monitorLogPath(Id))}`), { code: 'ENOENT' });
    await assert.rejects(
      h.service.logs(Id, { stdout: true, stderr: true, timestamps: false, follow: false, details: false }),
      /does not support reading/,
    );
    await h.service.remove(Id, {});
  });
});
