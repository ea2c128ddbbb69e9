import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { isKind } from '../../../../src/common/errors.js';
import { parseSignal } from '../../../../src/common/signals.js';
import { parseFilterTime } from '../../../../src/common/time.js';
import { decodeCreateRequest } from '../../../../src/engine/api/containers.create.js';
import { shapeInspect, shapeListItem } from '../../../../src/engine/api/containers.versions.js';
import { entrypointAndArgs, mergeImageConfig } from '../../../../src/engine/containers/core/create.js';
import { filterContainers } from '../../../../src/engine/containers/core/filters.js';
import { generateName, NameRegistry, normalizeName } from '../../../../src/engine/containers/core/names.js';
import { type ContainerRecord, ZERO_TIME } from '../../../../src/engine/containers/core/record.types.js';
import { RestartManager } from '../../../../src/engine/containers/core/restart.js';
import { startFailure } from '../../../../src/engine/containers/core/start-failure.js';
import { parsePsOutput } from '../../../../src/engine/containers/core/top.js';
import { humanDuration } from '../../../../src/engine/containers/core/units.js';
import { validateConfig, validateHostConfig } from '../../../../src/engine/containers/core/validate.js';
import {
  commandText,
  inspectView,
  listItemView,
  statusText,
} from '../../../../src/engine/containers/core/views.js';
import { DetachScanner, parseDetachKeys } from '../../../../src/engine/containers/io/detachkeys.js';
import { onlyResolvedStub, resolvConfContent } from '../../../../src/engine/containers/net/files.js';
import { referenceDir } from '../../../helpers/reference.js';

function invalid(fn: () => unknown, re: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isKind(err, 'InvalidParameter'), String(err));
    assert.match((err as Error).message, re);
    return true;
  });
}

const hv = { kernelMemory: true, swapSupported: true };

describe('names', () => {
  it('generates adjective_surname and never boring_wozniak', () => {
    for (let i = 0; i < 200; i++) {
      const n = generateName();
      assert.match(n, /^[a-z]+_[a-z]+$/);
      assert.notEqual(n, 'boring_wozniak');
    }
    assert.match(generateName(1), /^[a-z]+_[a-z]+\d$/);
  });
  it('validates names', () => {
    assert.equal(normalizeName('web.1_a-b'), '/web.1_a-b');
    assert.equal(normalizeName('/x1'), '/x1');
    invalid(() => normalizeName('a'), /Invalid container name/);
    invalid(() => normalizeName('-ab'), /Invalid container name/);
    invalid(() => normalizeName('a b'), /Invalid container name/);
  });
  it('resolves id, name, unique prefix; ambiguous prefix is 400', () => {
    const r = new NameRegistry();
    const a = `abc1${'0'.repeat(60)}`;
    const b = `abc2${'0'.repeat(60)}`;
    r.addId(a);
    r.addId(b);
    r.reserve('/web', a);
    assert.equal(r.resolve(a), a);
    assert.equal(r.resolve('web'), a);
    assert.equal(r.resolve('/web'), a);
    assert.equal(r.resolve('abc2'), b);
    invalid(() => r.resolve('abc'), /multiple IDs/);
    assert.throws(() => r.resolve('zzz'), /No such container: zzz/);
    assert.throws(() => r.reserve('/web', b), /already in use by container/);
  });
});

describe('create validation', () => {
  it('hostname, working dir, healthcheck, stop signal, ports', () => {
    invalid(() => validateConfig({ Hostname: 'bad_host' }), /invalid hostname format/);
    invalid(() => validateConfig({ Hostname: '-a' }), /invalid hostname/);
    validateConfig({ Hostname: 'a-b.example.com' });
    invalid(() => validateConfig({ WorkingDir: 'rel' }), /needs to be an absolute path/);
    invalid(
      () => validateConfig({ Healthcheck: { Interval: 5 } }),
      /Interval in Healthcheck cannot be less than 1ms/,
    );
    invalid(() => validateConfig({ Healthcheck: { Retries: -1 } }), /Retries/);
    invalid(() => validateConfig({ StopSignal: 'SIGNOPE' }), /Invalid signal/);
    invalid(() => validateConfig({ ExposedPorts: { '80/xyz': {} } }), /invalid/);
    invalid(() => validateConfig({ ExposedPorts: { '99999/tcp': {} } }), /invalid port/);
  });
  it('memory, swap, shm, restart policy, AutoRemove', () => {
    invalid(() => validateHostConfig({ Memory: 1024 }, {}, hv), /Minimum memory limit allowed is 6MB/);
    invalid(
      () => validateHostConfig({ Memory: 64 << 20, MemorySwap: 32 << 20 }, {}, hv),
      /memoryswap limit should be larger than memory limit/,
    );
    invalid(() => validateHostConfig({ MemorySwap: 64 << 20 }, {}, hv), /always set the Memory limit/);
    invalid(() => validateHostConfig({ ShmSize: -1 }, {}, hv), /SHM size can not be less than 0/);
    invalid(() => validateHostConfig({ MemorySwappiness: 101 }, {}, hv), /swappiness/);
    invalid(
      () => validateHostConfig({ RestartPolicy: { Name: 'always', MaximumRetryCount: 2 } }, {}, hv),
      /maximum retry count cannot be used with restart policy 'always'/,
    );
    invalid(
      () => validateHostConfig({ RestartPolicy: { Name: 'sometimes' as 'always' } }, {}, hv),
      /invalid restart policy 'sometimes'/,
    );
    invalid(
      () => validateHostConfig({ RestartPolicy: { Name: 'on-failure', MaximumRetryCount: -1 } }, {}, hv),
      /cannot be negative/,
    );
    invalid(
      () => validateHostConfig({ AutoRemove: true, RestartPolicy: { Name: 'always' } }, {}, hv),
      /can't create 'AutoRemove' container with restart policy/,
    );
    validateHostConfig({ AutoRemove: true, RestartPolicy: { Name: 'no' } }, {}, hv);
    assert.deepEqual(validateHostConfig({ PortBindings: { '80/tcp': [{ HostPort: '8080' }] } }, {}, hv), []);
    assert.match(
      validateHostConfig({ NetworkMode: 'host', PortBindings: { '80/tcp': [] } }, {}, hv)[0] ?? '',
      /discarded when using host network mode/,
    );
    const warnings = validateHostConfig({ Memory: 64 << 20 }, {}, { ...hv, swapSupported: false });
    assert.match(warnings[0] ?? '', /does not support swap limit/);
  });
  it('binds, mounts, ports, log config', () => {
    validateHostConfig({ Binds: ['/a'] }, {}, hv); // an anonymous volume
    invalid(() => validateHostConfig({ Binds: ['/'] }, {}, hv), /destination can't be '\/'/);
    invalid(() => validateHostConfig({ Binds: ['/a:rel'] }, {}, hv), /must be absolute/);
    invalid(() => validateHostConfig({ Binds: ['/a:/b:xx'] }, {}, hv), /invalid mode/);
    validateHostConfig({ Binds: ['/tmp:/b:ro', 'vol:/c'] }, {}, hv);
    invalid(
      () =>
        validateHostConfig({ Mounts: [{ Type: 'bind', Source: '/does/not/exist', Target: '/x' }] }, {}, hv),
      /bind source path does not exist/,
    );
    invalid(
      () => validateHostConfig({ PortBindings: { '80/tcp': [{ HostPort: 'abc' }] } }, {}, hv),
      /invalid port/,
    );
    invalid(
      () => validateHostConfig({ LogConfig: { Type: 'syslogx' } }, {}, hv),
      /error looking up logging plugin syslogx/,
    );
    invalid(
      () => validateHostConfig({ LogConfig: { Type: 'json-file', Config: { bogus: '1' } } }, {}, hv),
      /unknown log opt 'bogus'/,
    );
    validateHostConfig(
      { LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } } },
      {},
      hv,
    );
    validateHostConfig({ LogConfig: { Type: 'local' } }, {}, hv);
    validateHostConfig({ LogConfig: { Type: 'none' } }, {}, hv);
    // what dockerd's json-file driver refuses when the container starts, refused at create
    const logOpts = (Config: Record<string, string>) => () =>
      validateHostConfig({ LogConfig: { Type: 'json-file', Config } }, {}, hv);
    invalid(logOpts({ 'max-size': 'abc' }), /invalid size: 'abc'/);
    invalid(logOpts({ 'max-size': '0' }), /max-size must be a positive number/);
    invalid(logOpts({ 'max-file': '0' }), /max-file cannot be less than 1/);
    invalid(logOpts({ compress: 'maybe' }), /ParseBool/);
    invalid(logOpts({ compress: 'true' }), /compress cannot be true when max-file is less than 2/);
    invalid(logOpts({ 'labels-regex': '[' }), /error parsing regexp/);
    invalid(logOpts({ mode: 'x' }), /logging mode not supported: x/);
    invalid(logOpts({ 'max-buffer-size': '4m' }), /only supported with 'mode=non-blocking'/);
    logOpts({ 'max-size': '1.5k', 'max-file': '3', compress: 'true', 'env-regex': '(?i)^foo' })();
    logOpts({ mode: 'non-blocking', 'max-buffer-size': '4m' })();
  });
  it('merges the image config and computes Path/Args', () => {
    const merged = mergeImageConfig(
      { Env: ['A=1'], Labels: { x: 'user' } },
      {
        Env: ['A=0', 'PATH=/bin'],
        Cmd: ['sh'],
        Entrypoint: ['/init'],
        Labels: { x: 'img', y: 'img' },
        WorkingDir: '/w',
      },
    );
    assert.deepEqual(merged.Env, ['A=1', 'PATH=/bin']);
    assert.deepEqual(merged.Labels, { x: 'user', y: 'img' });
    assert.deepEqual(entrypointAndArgs(merged), { path: '/init', args: ['sh'] });
    assert.equal(merged.WorkingDir, '/w');
    const userCmd = mergeImageConfig({ Cmd: ['echo', 'hi'] }, { Cmd: ['sh'] });
    assert.deepEqual(entrypointAndArgs(userCmd), { path: 'echo', args: ['hi'] });
    const clearedEp = mergeImageConfig({ Entrypoint: [''], Cmd: ['ls'] }, { Entrypoint: ['/init'] });
    assert.deepEqual(entrypointAndArgs(clearedEp), { path: 'ls', args: [] });
    invalid(() => entrypointAndArgs({}), /No command specified/);
  });
  it('decodes create bodies: Cmd as string, type errors as 400, StartInterval gated', () => {
    const d = decodeCreateRequest(
      { Image: 'x', Cmd: 'echo hi', Healthcheck: { StartInterval: 5_000_000 } },
      '1.43',
    );
    assert.deepEqual(d.config.Cmd, ['echo hi']);
    assert.equal(d.config.Healthcheck?.StartInterval, undefined);
    invalid(() => decodeCreateRequest({ Image: 5 }, '1.44'), /cannot unmarshal/);
    invalid(() => decodeCreateRequest({ Env: 'A=1' }, '1.44'), /Env/);
    invalid(() => decodeCreateRequest({ HostConfig: { Memory: '1g' } }, '1.44'), /Memory/);
  });
});

describe('signals, detach keys, durations, resolv.conf, ps', () => {
  it('parses signals by name and number', () => {
    assert.equal(parseSignal('KILL'), 9);
    assert.equal(parseSignal('sigterm'), 15);
    assert.equal(parseSignal('SIGHUP'), 1);
    assert.equal(parseSignal('10'), 10);
    assert.equal(parseSignal('SIGRTMIN+3'), 37);
    invalid(() => parseSignal('NOPE'), /Invalid signal: NOPE/);
    invalid(() => parseSignal('0'), /Invalid signal/);
  });
  it('detach keys', () => {
    assert.deepEqual([...parseDetachKeys('ctrl-p,ctrl-q')], [16, 17]);
    assert.deepEqual([...parseDetachKeys('a,ctrl-@')], [97, 0]);
    invalid(() => parseDetachKeys('ctrl-1'), /^Invalid detach keys \(ctrl-1\) provided$/);
    invalid(() => parseDetachKeys('ctrl-P'), /Invalid detach keys/);
    assert.deepEqual([...parseDetachKeys('ctrl-@,ctrl-\\,ctrl-_,DEL,x')], [0, 28, 31, 127, 120]);
    const s = new DetachScanner(parseDetachKeys('ctrl-p,ctrl-q'));
    assert.deepEqual(s.push(Buffer.from([1, 16])), { pass: Buffer.from([1]), detach: false });
    assert.deepEqual(s.push(Buffer.from([2])), { pass: Buffer.from([16, 2]), detach: false });
    assert.deepEqual(s.push(Buffer.from([16, 17, 3])).detach, true);
  });
  it('filter times: unix seconds, RFC 3339, Go durations', () => {
    assert.equal(parseFilterTime('1700000000.5'), 1700000000500);
    assert.equal(parseFilterTime('2024-01-02'), Date.parse('2024-01-02T00:00:00Z'));
    assert.equal(parseFilterTime('1h30m', 10_000_000), 10_000_000 - 5_400_000);
    invalid(() => parseFilterTime('soon'), /failed to parse value as time or duration/);
  });
  it('human durations like Docker', () => {
    assert.equal(humanDuration(500), 'Less than a second');
    assert.equal(humanDuration(1000), '1 second');
    assert.equal(humanDuration(2000), '2 seconds');
    assert.equal(humanDuration(61_000), 'About a minute');
    assert.equal(humanDuration(5 * 60_000), '5 minutes');
    assert.equal(humanDuration(3_600_000), 'About an hour');
    assert.equal(humanDuration(3 * 3_600_000), '3 hours');
    assert.equal(humanDuration(3 * 86_400_000), '3 days');
  });
  it('resolv.conf drops loopback nameservers or uses Dns options', () => {
    const host = 'nameserver 127.0.0.53\nnameserver 10.0.0.2\nsearch example.com\noptions edns0\n';
    assert.equal(
      resolvConfContent(host, {}, false),
      'search example.com\nnameserver 10.0.0.2\noptions edns0\n',
    );
    assert.equal(
      resolvConfContent('nameserver 127.0.0.1\n', {}, false),
      'nameserver 8.8.8.8\nnameserver 8.8.4.4\n',
    );
    assert.equal(
      resolvConfContent(host, { Dns: ['1.1.1.1'], DnsSearch: ['a.b'], DnsOptions: ['ndots:2'] }, false),
      'search a.b\nnameserver 1.1.1.1\noptions ndots:2\n',
    );
    assert.match(resolvConfContent(host, {}, true), /nameserver 127\.0\.0\.53/);
  });
  it('keeps the ps rows of the container pids', () => {
    const out =
      'UID PID PPID C STIME TTY TIME CMD\nroot 10 1 0 07:21 ? 00:00:00 httpd -f -p 80\nroot 11 1 0 07:21 ? 00:00:00 other\n';
    const r = parsePsOutput(out, [10]);
    assert.deepEqual(r.Titles, ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD']);
    assert.deepEqual(r.Processes, [['root', '10', '1', '0', '07:21', '?', '00:00:00', 'httpd -f -p 80']]);
    invalid(() => parsePsOutput('A B\n1 2\n', [1]), /Couldn't find PID/);
  });
});

describe('restart manager', () => {
  it('doubles the delay from 100 ms, caps at a minute, resets after a 10 s run', () => {
    const rm = new RestartManager({ Name: 'always' });
    const delays = [1, 2, 3, 4].map(
      () => rm.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 10 }).delayMs,
    );
    assert.deepEqual(delays, [100, 200, 400, 800]);
    for (let i = 0; i < 20; i++) rm.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 10 });
    assert.equal(rm.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 10 }).delayMs, 60_000);
    assert.equal(
      rm.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 10_000 }).delayMs,
      100,
    );
    rm.cancel();
    assert.equal(rm.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 10 }).restart, false);
  });
  it('policies', () => {
    const onf = new RestartManager({ Name: 'on-failure', MaximumRetryCount: 2 });
    assert.equal(onf.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 1 }).restart, false);
    assert.equal(onf.shouldRestart(1, { manuallyStopped: false, restartCount: 1, runMs: 1 }).restart, true);
    assert.equal(onf.shouldRestart(1, { manuallyStopped: false, restartCount: 2, runMs: 1 }).restart, false);
    const us = new RestartManager({ Name: 'unless-stopped' });
    assert.equal(us.shouldRestart(0, { manuallyStopped: true, restartCount: 0, runMs: 1 }).restart, false);
    assert.equal(us.shouldRestart(0, { manuallyStopped: false, restartCount: 0, runMs: 1 }).restart, true);
    assert.equal(
      new RestartManager({ Name: 'no' }).shouldRestart(1, {
        manuallyStopped: false,
        restartCount: 0,
        runMs: 1,
      }).restart,
      false,
    );
  });
});

function record(over: Partial<ContainerRecord> = {}): ContainerRecord {
  return {
    ID: 'c'.repeat(64),
    Created: '2026-11-21T07:21:20.374598009Z',
    Path: 'httpd',
    Args: ['-f', '-p', '80'],
    Config: {
      Hostname: 'cccccccccccc',
      Image: 'busybox',
      Cmd: ['httpd', '-f', '-p', '80'],
      Labels: { a: 'b' },
    },
    Image: `sha256:${'f'.repeat(64)}`,
    Name: '/shape',
    Driver: 'overlay2',
    Platform: 'linux',
    RestartCount: 0,
    HasBeenStartedBefore: false,
    HasBeenManuallyStopped: false,
    MountLabel: '',
    ProcessLabel: '',
    AppArmorProfile: '',
    State: {
      Status: 'created',
      Running: false,
      Paused: false,
      Restarting: false,
      OOMKilled: false,
      Dead: false,
      RemovalInProgress: false,
      Pid: 0,
      ExitCode: 0,
      Error: '',
      StartedAt: ZERO_TIME,
      FinishedAt: ZERO_TIME,
    },
    ResolvConfPath: '/r',
    HostnamePath: '/h',
    HostsPath: '/hs',
    LogPath: '/l',
    NetworkingConfig: {},
    SandboxKey: '',
    ...over,
  };
}

function keyPaths(value: unknown, prefix = ''): string[] {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return [prefix];
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => {
    if (['Labels', 'ExposedPorts', 'PortBindings', 'Ports', 'Data', 'Env'].includes(k))
      return [`${prefix}${k}`];
    return keyPaths(v, `${prefix}${k}.`);
  });
}

const refDir = referenceDir;
const hcDefaults = {
  NetworkMode: 'default',
  LogConfig: { Type: 'json-file', Config: {} },
  RestartPolicy: { Name: 'no' as const, MaximumRetryCount: 0 },
  ShmSize: 67108864,
  IpcMode: 'private',
  CgroupnsMode: 'host',
  Runtime: 'runc',
  Dns: [],
  DnsOptions: [],
  DnsSearch: [],
  ConsoleSize: [0, 0] as [number, number],
  MaskedPaths: ['/proc/asound'],
  ReadonlyPaths: ['/proc/bus'],
};

describe('host resolv.conf', () => {
  it("takes systemd-resolved's list when the host names only its stub", () => {
    assert.equal(onlyResolvedStub('# managed\nnameserver 127.0.0.53\noptions edns0\n'), true);
    assert.equal(onlyResolvedStub('nameserver 127.0.0.53\nnameserver 10.0.0.2\n'), false);
    assert.equal(onlyResolvedStub('search example.com\n'), false);
  });
});

describe('inspect and list shapes per API version', () => {
  // views are what JSON makes of them (keys left out are undefined in the objects)
  const json = <T>(v: T): T => JSON.parse(JSON.stringify(v));
  it('inspect of a created container has the keys of dockerd 20.10 (1.24 and 1.41)', () => {
    const ref = JSON.parse(readFileSync(`${refDir}/container-inspect-created.v1.41.json`, 'utf8'));
    const view = inspectView({
      record: record(),
      hostConfig: hcDefaults,
      execIds: [],
      graphDriverData: { LowerDir: 'x', MergedDir: 'm', UpperDir: 'u', WorkDir: 'w' },
    });
    for (const version of ['1.24', '1.41']) {
      const shaped = json(shapeInspect(view, version));
      assert.deepEqual(keyPaths(shaped), keyPaths(ref), `version ${version}`);
    }
    const sized = JSON.parse(readFileSync(`${refDir}/container-inspect-size.v1.41.json`, 'utf8'));
    const withSize = inspectView({
      record: record(),
      hostConfig: hcDefaults,
      execIds: [],
      sizeRw: 0,
      sizeRootFs: 5,
      graphDriverData: { LowerDir: 'x', MergedDir: 'm', UpperDir: 'u', WorkDir: 'w' },
    });
    assert.deepEqual(Object.keys(json(shapeInspect(withSize, '1.41'))), Object.keys(sized));
  });
  it('1.44 adds DNSNames, omits unset KernelMemory; Annotations from 1.43', () => {
    const view = inspectView({
      record: record(),
      hostConfig: { ...hcDefaults, Annotations: { k: 'v' } },
      execIds: [],
    });
    const v44 = json(shapeInspect(view, '1.44'));
    assert.equal('KernelMemory' in v44.HostConfig, false);
    assert.deepEqual(v44.HostConfig.Annotations, { k: 'v' });
    assert.equal(v44.NetworkSettings.Networks.bridge?.DNSNames, null);
    const v41 = json(shapeInspect(view, '1.41'));
    assert.equal('Annotations' in v41.HostConfig, false);
    assert.equal(v41.HostConfig.KernelMemory, 0);
    assert.equal('DNSNames' in (v41.NetworkSettings.Networks.bridge ?? {}), false);
  });
  it('list item has the keys of dockerd 20.10', () => {
    const ref = JSON.parse(readFileSync(`${refDir}/containers-list.v1.41.json`, 'utf8'))[0];
    const item = json(
      shapeListItem(
        listItemView({ record: record(), hostConfig: hcDefaults, execIds: [], imageName: 'busybox' }),
        '1.41',
      ),
    );
    assert.deepEqual(keyPaths(item), keyPaths(ref));
    assert.equal(item.Command, 'httpd -f -p 80');
    assert.equal(commandText(record({ Path: 'sh', Args: ['-c', 'exit 3'] })), "sh -c 'exit 3'");
    assert.equal(commandText(record({ Path: 'true', Args: [] })), 'true');
    assert.equal('SizeRw' in item, false);
    assert.equal(item.Status, 'Created');
  });
  it('status text', () => {
    const now = Date.parse('2026-11-21T07:21:30Z');
    const running = record({
      State: { ...record().State, Status: 'running', Running: true, StartedAt: '2026-11-21T07:21:28Z' },
    });
    assert.equal(statusText(running, now), 'Up 2 seconds');
    const exited = record({
      HasBeenStartedBefore: true,
      State: {
        ...record().State,
        Status: 'exited',
        ExitCode: 3,
        StartedAt: '2026-11-21T07:00:00Z',
        FinishedAt: '2026-11-21T07:16:30Z',
      },
    });
    assert.equal(statusText(exited, now), 'Exited (3) 5 minutes ago');
  });
});

describe('list filters', () => {
  it('label, exited, status, before/since, expose, is-task', () => {
    const mk = (id: string, created: string, over: Partial<ContainerRecord> = {}) => ({
      record: record({ ID: id.repeat(64), Created: created, ...over }),
      hostConfig: {},
    });
    const a = mk('a', '2026-11-21T07:00:00.1Z', {
      Config: { Labels: { team: 'a' }, ExposedPorts: { '80/tcp': {} } },
    });
    const b = mk('b', '2026-11-21T07:00:00.12Z', {
      HasBeenStartedBefore: true,
      State: {
        ...record().State,
        Status: 'exited',
        ExitCode: 3,
        StartedAt: '2026-11-21T07:00:01Z',
        FinishedAt: '2026-11-21T07:00:02Z',
      },
    });
    const all = [a, b];
    const helpers = { resolve: (x: string) => x, ancestorIds: () => [] };
    const q = (filters: Record<string, string[]>) =>
      filterContainers(all, { all: true, limit: 0, filters: new Map(Object.entries(filters)) }, helpers).map(
        (c) => c.record.ID[0],
      );
    assert.deepEqual(q({}), ['b', 'a']);
    assert.deepEqual(q({ label: ['team'] }), ['a']);
    assert.deepEqual(q({ label: ['team=b'] }), []);
    assert.deepEqual(q({ exited: ['3'] }), ['b']);
    assert.deepEqual(q({ status: ['created'] }), ['a']);
    assert.deepEqual(q({ expose: ['80'] }), ['a']);
    assert.deepEqual(q({ expose: ['79-81/tcp'] }), ['a']);
    assert.deepEqual(q({ 'is-task': ['true'] }), []);
    assert.deepEqual(q({ since: ['a'.repeat(64)] }), ['b']);
    assert.deepEqual(q({ before: ['b'.repeat(64)] }), ['a']);
    assert.throws(() => q({ exited: ['x'] }), /invalid filter 'exited=x'/);
  });
});

describe('start failures', () => {
  it("decide exit code and whose error it is as dockerd's translateContainerdStartErr", () => {
    const rt = (m: string) => new Error(`OCI runtime create failed: runc create failed: ${m}`);
    assert.deepEqual(
      startFailure(rt('exec: "/nope": stat /nope: no such file or directory'), '/nope').exitCode,
      127,
    );
    assert.equal(startFailure(rt('exec: "/bin/x": permission denied'), '/bin/x').exitCode, 126);
    const dir = startFailure(rt('mount /a to rootfs: not a directory'), 'sh');
    assert.equal(dir.exitCode, 127);
    assert.match(dir.message, /Are you trying to mount a directory onto a file/);
    // not the runtime's: a volume that would not mount is the engine's error, exit 128
    const vol = startFailure(new Error('error while mounting volume: no such file or directory'), 'sh');
    assert.deepEqual([vol.exitCode, vol.userError], [128, false]);
    // a command runc quotes (a tab, a quote, a newline) is still the user's (found by the fuzzer: a 500)
    for (const cmd of ['\t', 'a"b', 'x\ny', '\u0000', 'é☃']) {
      const quoted = JSON.stringify(cmd);
      const f = startFailure(
        rt(`unable to start container process: exec: ${quoted}: executable file not found in $PATH`),
        cmd,
      );
      assert.deepEqual([f.exitCode, f.userError], [127, true], quoted);
    }
    // a limit the kernel refuses is the user's too
    const rtRuntime = startFailure(
      rt('failed to write "93278924": write /sys/fs/cgroup/cpu/berth/x/cpu.rt_runtime_us: invalid argument'),
      'sh',
    );
    assert.equal(rtRuntime.userError, true);
  });
});
