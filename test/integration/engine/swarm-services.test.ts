import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { freePort, initLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * Swarm services and tasks, the API (issue 14 §3), on a one-manager swarm with its real etcd
 * member, through the docker CLI 28 and raw HTTP. Expected specs and texts are dockerd 20.10's
 * for the same commands and bodies (recorded against Debian's dockerd in swarm mode).
 */

const S = 1_000_000_000;

interface ApiError {
  message: string;
}

describe('swarm services and tasks (one manager)', () => {
  let engine: TestEngine;

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await engine.request(method, path, body === undefined ? {} : { body });
    const text = r.body.toString();
    return { status: r.status, json: text ? JSON.parse(text) : undefined };
  };
  const create = async (spec: unknown, version = 'v1.41') => api('POST', `/${version}/services/create`, spec);
  const inspect = async (ref: string, query = '') =>
    (await api('GET', `/v1.41/services/${ref}${query}`)).json;
  const message = (r: { json: unknown }) => (r.json as ApiError).message;
  /**
   * A CLI service change. The orchestrator writes the service too (UpdateStatus, as swarmkit's
   * updater does), so the version the CLI just read may be stale: dockerd then answers `update out
   * of sequence` and changes nothing, and the change is made again, as a user would.
   */
  const serviceCli = async (args: string[]) => {
    for (let i = 0; ; i++) {
      const r = await engine.docker(['service', ...args]);
      if (r.code === 0 || i === 4 || !r.stderr.includes('update out of sequence')) return r;
    }
  };
  const serviceCliOk = async (args: string[]) => {
    const r = await serviceCli(args);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.trim();
  };

  before(async () => {
    const peerPort = await freePort();
    const listenPort = await freePort();
    engine = await TestEngine.start({ bridge: 'none', args: ['--swarm-etcd-peer-port', String(peerPort)] });
    const outside = await engine.request('GET', '/v1.41/services');
    assert.equal(outside.status, 503);
    const old = await engine.request('GET', '/v1.24/tasks');
    assert.equal(old.status, 406);
    await initLoopbackSwarm(engine, listenPort);
  });
  after(async () => {
    await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await engine?.destroy();
  });

  it('stores every create flag of the CLI as dockerd does', async () => {
    await engine.dockerOk(['secret', 'create', 's1', '-'], { input: 'x' });
    await engine.dockerOk(['config', 'create', 'c1', '-'], { input: 'y' });
    const envFile = join(engine.dataRoot, '..', 'svc-env');
    await writeFile(envFile, 'B=2\n');
    const created = await engine.docker(
      [
        ...['service', 'create', '-d', '-q', '--name', 'full', '--replicas', '3'],
        ...['-p', '8080:80', '-p', 'mode=host,target=81,published=8081,protocol=udp'],
        ...['--secret', 's1', '--config', 'source=c1,target=/etc/c1,mode=0400'],
        ...['--constraint', 'node.role==manager', '--placement-pref', 'spread=node.labels.zone'],
        ...['--replicas-max-per-node', '2', '--reserve-cpu', '0.5', '--reserve-memory', '64M'],
        ...['--limit-cpu', '1', '--limit-memory', '128M', '--limit-pids', '100'],
        ...['--restart-condition', 'on-failure', '--restart-delay', '3s', '--restart-max-attempts', '4'],
        ...['--restart-window', '1m', '--update-parallelism', '2', '--update-delay', '5s'],
        ...[
          '--update-failure-action',
          'rollback',
          '--update-monitor',
          '10s',
          '--update-max-failure-ratio',
          '0.25',
        ],
        ...['--update-order', 'start-first', '--rollback-parallelism', '3', '--rollback-delay', '1s'],
        ...['--rollback-failure-action', 'continue', '--rollback-monitor', '2s'],
        ...['--rollback-max-failure-ratio', '0.5', '--rollback-order', 'stop-first'],
        ...['-e', 'A=1', '--env-file', envFile, '--label', 'l=1', '--container-label', 'cl=2'],
        ...['--mount', 'type=volume,source=v,target=/data', '--mount', 'type=tmpfs,target=/t,tmpfs-size=1m'],
        ...['--mount', 'type=bind,source=/tmp,target=/h,readonly'],
        ...['--health-cmd', 'true', '--health-interval', '5s', '--health-retries', '2'],
        ...['--health-timeout', '2s', '--health-start-period', '1s', '--stop-grace-period', '20s'],
        ...['--stop-signal', 'SIGINT', '--hostname', '{{.Node.Hostname}}-{{.Task.Slot}}'],
        ...['--endpoint-mode', 'vip', '--dns', '1.1.1.1', '--dns-search', 'example.com'],
        ...['--dns-option', 'ndots:2', '--host', 'h1:10.0.0.9', '--init', '--read-only', '-u', '1000'],
        ...['-w', '/tmp', '--entrypoint', '/bin/sh', '-t', '--cap-add', 'NET_ADMIN', '--cap-drop', 'CHOWN'],
        ...['--sysctl', 'net.core.somaxconn=1024', '--ulimit', 'nofile=1024:2048', '--group', '10'],
        ...['--no-resolve-image', 'busybox', '-c', 'sleep 1000'],
      ],
      { timeoutMs: 60_000 },
    );
    assert.equal(created.code, 0, created.stderr);
    const id = created.stdout.trim();
    assert.match(id, /^[0-9a-z]{25}$/);
    const [svc] = JSON.parse(await engine.dockerOk(['service', 'inspect', 'full']));
    const secret = JSON.parse(await engine.dockerOk(['secret', 'inspect', 's1']))[0].ID;
    const config = JSON.parse(await engine.dockerOk(['config', 'inspect', 'c1']))[0].ID;
    const ports = [
      { Protocol: 'tcp', TargetPort: 80, PublishedPort: 8080, PublishMode: 'ingress' },
      { Protocol: 'udp', TargetPort: 81, PublishedPort: 8081, PublishMode: 'host' },
    ];
    assert.deepEqual(svc.Spec, {
      Name: 'full',
      Labels: { l: '1' },
      TaskTemplate: {
        ContainerSpec: {
          Image: 'busybox:latest',
          Labels: { cl: '2' },
          Command: ['/bin/sh'],
          Args: ['-c', 'sleep 1000'],
          Hostname: '{{.Node.Hostname}}-{{.Task.Slot}}',
          Env: ['B=2', 'A=1'],
          Dir: '/tmp',
          User: '1000',
          Groups: ['10'],
          Init: true,
          StopSignal: 'SIGINT',
          TTY: true,
          ReadOnly: true,
          Mounts: [
            { Type: 'volume', Source: 'v', Target: '/data' },
            { Type: 'tmpfs', Target: '/t', TmpfsOptions: { SizeBytes: 1048576 } },
            { Type: 'bind', Source: '/tmp', Target: '/h', ReadOnly: true },
          ],
          StopGracePeriod: 20 * S,
          Healthcheck: {
            Test: ['CMD-SHELL', 'true'],
            Interval: 5 * S,
            Timeout: 2 * S,
            StartPeriod: 1 * S,
            Retries: 2,
          },
          Hosts: ['10.0.0.9 h1'],
          DNSConfig: { Nameservers: ['1.1.1.1'], Search: ['example.com'], Options: ['ndots:2'] },
          Secrets: [
            { File: { Name: 's1', UID: '0', GID: '0', Mode: 292 }, SecretID: secret, SecretName: 's1' },
          ],
          Configs: [
            { File: { Name: '/etc/c1', UID: '0', GID: '0', Mode: 256 }, ConfigID: config, ConfigName: 'c1' },
          ],
          Isolation: 'default',
          Sysctls: { 'net.core.somaxconn': '1024' },
          CapabilityAdd: ['CAP_NET_ADMIN'],
          CapabilityDrop: ['CAP_CHOWN'],
          Ulimits: [{ Name: 'nofile', Hard: 2048, Soft: 1024 }],
        },
        Resources: {
          Limits: { NanoCPUs: 1000000000, MemoryBytes: 134217728, Pids: 100 },
          Reservations: { NanoCPUs: 500000000, MemoryBytes: 67108864 },
        },
        RestartPolicy: { Condition: 'on-failure', Delay: 3 * S, MaxAttempts: 4, Window: 60 * S },
        Placement: {
          Constraints: ['node.role==manager'],
          Preferences: [{ Spread: { SpreadDescriptor: 'node.labels.zone' } }],
          MaxReplicas: 2,
        },
        ForceUpdate: 0,
        Runtime: 'container',
      },
      Mode: { Replicated: { Replicas: 3 } },
      UpdateConfig: {
        Parallelism: 2,
        Delay: 5 * S,
        FailureAction: 'rollback',
        Monitor: 10 * S,
        MaxFailureRatio: 0.25,
        Order: 'start-first',
      },
      RollbackConfig: {
        Parallelism: 3,
        Delay: 1 * S,
        FailureAction: 'continue',
        Monitor: 2 * S,
        MaxFailureRatio: 0.5,
        Order: 'stop-first',
      },
      EndpointSpec: { Mode: 'vip', Ports: ports },
    });
    // the leader gives an ingress-published service a VIP on `ingress` as soon as it sees it
    const { VirtualIPs, ...endpoint } = svc.Endpoint as { VirtualIPs?: { Addr: string }[] };
    assert.deepEqual(endpoint, { Spec: { Mode: 'vip', Ports: ports }, Ports: ports });
    for (const v of VirtualIPs ?? []) assert.match(v.Addr, /^10\.0\.0\.\d+\/24$/);
    assert.deepEqual(Object.keys(svc), ['ID', 'Version', 'CreatedAt', 'UpdatedAt', 'Spec', 'Endpoint']);

    const ls = (await engine.dockerOk(['service', 'ls'])).split('\n');
    assert.match(ls[0] ?? '', /^ID +NAME +MODE +REPLICAS +IMAGE +PORTS$/);
    assert.match(
      ls[1] ?? '',
      /^\w{12} +full +replicated +0\/3 \(max 2 per node\) +busybox:latest +\*:8080->80\/tcp$/,
    );
    const pretty = await engine.dockerOk(['service', 'inspect', '--pretty', 'full']);
    assert.match(pretty, /^ Replicas:\s+3$/m);
    assert.match(pretty, /^ Image:\s+busybox:latest$/m);

    // the in-use refusal: swarmkit's words, and the secret stays
    const rm = await engine.docker(['secret', 'rm', 's1']);
    assert.equal(rm.code, 1);
    assert.equal(
      rm.stderr.trim(),
      "Error response from daemon: rpc error: code = InvalidArgument desc = secret 's1' is in use by the following service: full",
    );
    const rmc = await engine.docker(['config', 'rm', 'c1']);
    assert.match(rmc.stderr, /config 'c1' is in use by the following service: full$/m);

    // a second service cannot take the ingress port
    const clash = await engine.docker([
      'service',
      'create',
      '-d',
      '--name',
      'clash',
      '-p',
      '8080:80',
      'busybox',
    ]);
    assert.equal(clash.code, 1);
    assert.equal(
      clash.stderr.trim().split('\n').pop(),
      `Error response from daemon: rpc error: code = InvalidArgument desc = port '8080' is already in use by service 'full' (${id}) as an ingress port`,
    );
    assert.equal(await engine.dockerOk(['service', 'rm', 'full']), 'full');
    assert.equal(await engine.dockerOk(['secret', 'rm', 's1']), 's1');
    assert.equal(await engine.dockerOk(['config', 'rm', 'c1']), 'c1');
  });

  it('keeps a raw spec as dockerd does and fills the defaults only when asked', async () => {
    const r = await create({
      Name: 'raw1',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' }, RestartPolicy: {}, Placement: {}, Resources: {} },
      Mode: { Replicated: {} },
      UpdateConfig: {},
      EndpointSpec: { Ports: [{ TargetPort: 80 }] },
    });
    assert.equal(r.status, 201);
    assert.deepEqual(Object.keys(r.json), ['ID']);
    const svc = await inspect('raw1');
    assert.deepEqual(svc.Spec, {
      Name: 'raw1',
      Labels: {},
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox', Isolation: 'default' },
        Resources: {},
        RestartPolicy: { Condition: 'any', MaxAttempts: 0 },
        Placement: {},
        ForceUpdate: 0,
        Runtime: 'container',
      },
      Mode: { Replicated: { Replicas: 1 } },
      UpdateConfig: { Parallelism: 0, FailureAction: 'pause', MaxFailureRatio: 0, Order: 'stop-first' },
      EndpointSpec: { Mode: 'vip', Ports: [{ Protocol: 'tcp', TargetPort: 80, PublishMode: 'ingress' }] },
    });
    // PublishedPort 0: a free port from 30000 up, in Endpoint.Ports
    assert.deepEqual(svc.Endpoint.Ports, [
      { Protocol: 'tcp', TargetPort: 80, PublishedPort: 30000, PublishMode: 'ingress' },
    ]);
    const full = await inspect('raw1', '?insertDefaults=true');
    assert.deepEqual(full.Spec, {
      Name: 'raw1',
      Labels: {},
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox', StopGracePeriod: 10 * S, DNSConfig: {}, Isolation: 'default' },
        Resources: {},
        RestartPolicy: { Condition: 'any', Delay: 5 * S, MaxAttempts: 0 },
        Placement: {},
        ForceUpdate: 0,
        Runtime: 'container',
      },
      Mode: { Replicated: { Replicas: 1 } },
      UpdateConfig: {
        Parallelism: 0,
        FailureAction: 'pause',
        Monitor: 5 * S,
        MaxFailureRatio: 0,
        Order: 'stop-first',
      },
      RollbackConfig: {
        Parallelism: 1,
        FailureAction: 'pause',
        Monitor: 5 * S,
        MaxFailureRatio: 0,
        Order: 'stop-first',
      },
      EndpointSpec: { Mode: 'vip', Ports: [{ Protocol: 'tcp', TargetPort: 80, PublishMode: 'ingress' }] },
    });

    const bare = await create({
      Name: 'raw2',
      Labels: { a: 'b' },
      TaskTemplate: {
        ContainerSpec: {
          Image: 'busybox',
          Init: false,
          Healthcheck: {},
          Privileges: {},
          DNSConfig: {},
          StopGracePeriod: 0,
          Labels: {},
          Env: [],
          Command: [],
        },
        LogDriver: {},
        Networks: [],
      },
      Networks: [],
    });
    assert.equal(bare.status, 201);
    const raw2 = await inspect('raw2');
    assert.deepEqual(raw2.Spec, {
      Name: 'raw2',
      Labels: { a: 'b' },
      TaskTemplate: {
        ContainerSpec: {
          Image: 'busybox',
          Privileges: { CredentialSpec: null, SELinuxContext: null },
          Init: false,
          StopGracePeriod: 0,
          Healthcheck: {},
          DNSConfig: {},
          Isolation: 'default',
        },
        LogDriver: {},
        ForceUpdate: 0,
        Runtime: 'container',
      },
      Mode: { Replicated: { Replicas: 1 } },
    });
    assert.deepEqual(raw2.Endpoint, { Spec: {} });
    const job = await create({
      Name: 'job1',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' } },
      Mode: { ReplicatedJob: {} },
    });
    assert.equal(job.status, 201);
    const j = await inspect('job1');
    assert.deepEqual(j.Spec.Mode, { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } });
    assert.deepEqual(j.JobStatus.JobIteration, {});
    // below 1.41 the job mode is not there (moby's adjustForAPIVersion)
    const old = (await api('GET', '/v1.40/services/job1')).json;
    assert.deepEqual(old.Spec.Mode, {});
    // fields too new for the request's version are dropped from the body (1.40: no CapabilityAdd)
    const v140 = await create(
      {
        Name: 'old140',
        TaskTemplate: {
          ContainerSpec: { Image: 'busybox', Sysctls: { 'a.b': '1' }, CapabilityAdd: ['CAP_X'] },
        },
      },
      'v1.40',
    );
    assert.equal(v140.status, 201);
    const o = (await inspect('old140')).Spec.TaskTemplate.ContainerSpec;
    assert.deepEqual([o.Sysctls, o.CapabilityAdd], [{ 'a.b': '1' }, undefined]);
    const badBool = await api('GET', '/v1.41/services/old140?insertDefaults=maybe');
    assert.equal(badBool.status, 400);
    assert.equal(
      message(badBool),
      'invalid value for insertDefaults: maybe: strconv.ParseBool: parsing "maybe": invalid syntax',
    );
    await api('DELETE', '/v1.41/services/old140');
    const unnamed = await create({ TaskTemplate: { ContainerSpec: { Image: 'busybox' } } });
    assert.equal(unnamed.status, 201);
    assert.match((await inspect(unnamed.json.ID)).Spec.Name, /^[a-z]+_[a-z]+\d*$/);
    await api('DELETE', `/services/${unnamed.json.ID}`);
  });

  it("refuses bad specs with dockerd's status and words", async () => {
    const base = { TaskTemplate: { ContainerSpec: { Image: 'busybox' } } };
    const cases: [unknown, number, string][] = [
      [
        { ...base, Name: 'raw1' },
        409,
        'rpc error: code = AlreadyExists desc = name conflicts with an existing object: service raw1 already exists',
      ],
      [
        { ...base, Name: 'bad name' },
        400,
        'rpc error: code = InvalidArgument desc = name must be valid as a DNS name component',
      ],
      [
        { Name: 'x1', TaskTemplate: { ContainerSpec: {} } },
        400,
        'rpc error: code = InvalidArgument desc = ContainerSpec: image reference must be provided',
      ],
      [{ Name: 'x1', TaskTemplate: {} }, 400, 'mismatched Runtime and *Spec fields'],
      [
        { ...base, Name: 'x1', Mode: { Replicated: { Replicas: -1 } } },
        400,
        'json: cannot unmarshal number -1 into Go struct field ReplicatedService.Mode.Replicated.Replicas of type uint64',
      ],
      [
        { ...base, Name: 'x1', Mode: { Global: { Replicas: 2 } } },
        400,
        'replicas can only be used with replicated or replicated-job mode',
      ],
      [
        { ...base, Name: 'x1', Mode: { Replicated: { MaxConcurrent: 2 } } },
        400,
        'max-concurrent and total-completions can only be used with replicated-job mode',
      ],
      [
        { ...base, Name: 'x1', Mode: { Global: {}, Replicated: {} } },
        400,
        'must specify only one service mode',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: { ContainerSpec: { Image: 'busybox' }, RestartPolicy: { Condition: 'bad' } },
        },
        400,
        'invalid RestartCondition: "bad"',
      ],
      [
        { ...base, Name: 'x1', UpdateConfig: { FailureAction: 'explode' } },
        400,
        'unrecognized update failure action explode',
      ],
      [{ ...base, Name: 'x1', UpdateConfig: { Order: 'x' } }, 400, 'unrecognized update order x'],
      [
        { ...base, Name: 'x1', RollbackConfig: { FailureAction: 'rollback' } },
        400,
        'rpc error: code = InvalidArgument desc = RollbackConfig: FailureAction rollback is not allowed, only pause or continue',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: {
            ContainerSpec: { Image: 'busybox' },
            Placement: { Constraints: ['node.role=manager'] },
          },
        },
        400,
        'rpc error: code = Unknown desc = constraint expected one operator from ==, !=',
      ],
      [
        { Name: 'x1', TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Runtime: 'foo' } },
        400,
        'unsupported runtime',
      ],
      [
        { Name: 'x1', TaskTemplate: { ContainerSpec: { Image: 'busybox' }, RestartPolicy: { Delay: -5 } } },
        400,
        'rpc error: code = InvalidArgument desc = TaskSpec: restart-delay cannot be negative',
      ],
      [
        { ...base, Name: 'x1', UpdateConfig: { Delay: -5 } },
        400,
        'rpc error: code = InvalidArgument desc = TaskSpec: update-delay cannot be negative',
      ],
      [
        { ...base, Name: 'x1', UpdateConfig: { MaxFailureRatio: 2 } },
        400,
        'rpc error: code = InvalidArgument desc = TaskSpec: update-maxfailureratio cannot be less than 0 or bigger than 1',
      ],
      [
        { ...base, Name: 'x1', UpdateConfig: { Delay: '5s' } },
        400,
        'json: cannot unmarshal string into Go struct field UpdateConfig.UpdateConfig.Delay of type time.Duration',
      ],
      [{ ...base, Name: 'x1', EndpointSpec: { Mode: 'bad' } }, 400, 'invalid resolution mode: "bad"'],
      [
        { ...base, Name: 'x1', EndpointSpec: { Mode: 'dnsrr', Ports: [{ TargetPort: 80 }] } },
        400,
        "rpc error: code = InvalidArgument desc = EndpointSpec: port published with ingress mode can't be used with dnsrr mode",
      ],
      [
        { Name: 'x1', TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Networks: [{ Target: 'nope' }] } },
        404,
        'network nope not found',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Networks: [{ Target: 'host' }] },
        },
        404,
        'could not find the corresponding predefined swarm network: network host not found',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Networks: [{ Target: 'svclocal' }] },
        },
        403,
        'The network svclocal cannot be used with services. Only networks scoped to the swarm can be used, such as those created with the overlay driver.',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: {
            ContainerSpec: {
              Image: 'busybox',
              Secrets: [{ SecretName: 'nope', SecretID: 'nope', File: { Name: 'x' } }],
            },
          },
        },
        400,
        'rpc error: code = InvalidArgument desc = secret not found: nope',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: {
            ContainerSpec: { Image: 'busybox', Secrets: [{ SecretName: 'nope', File: { Name: 'x' } }] },
          },
        },
        404,
        'secret nope not found',
      ],
      [
        { Name: 'x1', TaskTemplate: { ContainerSpec: { Image: 'BAD IMAGE' } } },
        400,
        'rpc error: code = InvalidArgument desc = ContainerSpec: "BAD IMAGE" is not a valid repository/tag',
      ],
      [
        { ...base, Name: 'x1', EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 30000 }] } },
        400,
        "rpc error: code = InvalidArgument desc = port '30000' is already in use by service 'raw1' (RAW1) as an ingress port",
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Resources: { Limits: { NanoCPUs: 5 } } },
        },
        400,
        'rpc error: code = InvalidArgument desc = invalid cpu value 5e-09: Must be at least 0.001',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Resources: { Limits: { MemoryBytes: 5 } } },
        },
        400,
        'rpc error: code = InvalidArgument desc = invalid memory value 5: Must be at least 4MiB',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: { ContainerSpec: { Image: 'busybox', Mounts: [{ Type: 'bad', Target: '/a' }] } },
        },
        400,
        'invalid MountType: "bad"',
      ],
      [
        {
          Name: 'x1',
          TaskTemplate: {
            ContainerSpec: {
              Image: 'busybox',
              Mounts: [
                { Type: 'bind', Target: '/a', Source: '/b' },
                { Type: 'bind', Target: '/a', Source: '/b' },
              ],
            },
          },
        },
        400,
        'rpc error: code = InvalidArgument desc = ContainerSpec: duplicate mount point: /a',
      ],
      [
        { ...base, Name: 'x1', Mode: { ReplicatedJob: {} }, UpdateConfig: { Parallelism: 1 } },
        400,
        'rpc error: code = InvalidArgument desc = Jobs may not have an update config',
      ],
      [[], 400, 'json: cannot unmarshal array into Go value of type swarm.ServiceSpec'],
    ];
    const raw1 = (await inspect('raw1')).ID;
    await engine.dockerOk(['network', 'create', 'svclocal']);
    try {
      for (const [body, status, text] of cases) {
        const r = await create(body);
        assert.equal(message(r), text.replace('RAW1', raw1), JSON.stringify(body));
        assert.equal(r.status, status, JSON.stringify(body));
      }
    } finally {
      await engine.dockerOk(['network', 'rm', 'svclocal']);
    }
    const names = (await api('GET', '/v1.41/services')).json.map(
      (s: { Spec: { Name: string } }) => s.Spec.Name,
    );
    assert.ok(!names.includes('x1'), 'nothing half-made');
  });

  it('updates by version, keeps PreviousSpec, rolls back, and bumps the spec version only for task changes', async () => {
    const svc = await inspect('raw2');
    const noVersion = await api('POST', '/v1.41/services/raw2/update', svc.Spec);
    assert.equal(noVersion.status, 400);
    assert.equal(
      message(noVersion),
      `invalid service version '': strconv.ParseUint: parsing "": invalid syntax`,
    );
    const stale = await api('POST', `/v1.41/services/raw2/update?version=${svc.Version.Index - 1}`, svc.Spec);
    assert.equal(stale.status, 409);
    assert.equal(message(stale), 'rpc error: code = Unknown desc = update out of sequence');
    const mode = await api('POST', `/v1.41/services/raw2/update?version=${svc.Version.Index}`, {
      ...svc.Spec,
      Mode: { Global: {} },
    });
    assert.equal(mode.status, 400);
    assert.equal(message(mode), 'rpc error: code = Unimplemented desc = service mode change is not allowed');
    const rename = await api('POST', `/v1.41/services/raw2/update?version=${svc.Version.Index}`, {
      ...svc.Spec,
      Name: 'raw3',
    });
    assert.equal(
      message(rename),
      'rpc error: code = Unimplemented desc = renaming services is not supported',
    );
    const noPrev = await api(
      'POST',
      `/v1.41/services/raw2/update?version=${svc.Version.Index}&rollback=previous`,
      svc.Spec,
    );
    assert.equal(noPrev.status, 400);
    assert.equal(
      message(noPrev),
      `rpc error: code = FailedPrecondition desc = service ${svc.ID} does not have a previous spec`,
    );

    // Labels and Replicas alone leave the tasks up to date; the image does not. The CLI's first
    // update sends the image as busybox:latest (a task change); then a task the orchestrator made
    // from that spec stays in `_up-to-date` through a label change and a scale, until the image changes
    const taskIds = async (filters: Record<string, string[]>): Promise<string[]> => {
      const tasks = await api('GET', `/v1.41/tasks?filters=${encodeURIComponent(JSON.stringify(filters))}`);
      return (tasks.json as { ID: string; Slot?: number }[]).filter((t) => t.Slot === 1).map((t) => t.ID);
    };
    const upToDate = () => taskIds({ service: ['raw2'], '_up-to-date': ['true'] });
    await serviceCliOk(['update', '-d', '--label-add', 'x=y', 'raw2']);
    let first: string | undefined;
    await eventually('a task of raw2 made from its current spec', async () => {
      first = (await upToDate())[0];
      return first !== undefined;
    });
    await serviceCliOk(['update', '-d', '--label-add', 'z=w', 'raw2']);
    assert.ok((await upToDate()).includes(first ?? ''), 'a label change keeps the task up to date');
    await serviceCliOk(['scale', '-d', 'raw2=2']);
    const scaled = await inspect('raw2');
    assert.deepEqual(scaled.Spec.Mode, { Replicated: { Replicas: 2 } });
    assert.equal(scaled.Spec.Labels.x, 'y');
    assert.equal(scaled.PreviousSpec.Mode.Replicated.Replicas, 1);
    assert.ok((await upToDate()).includes(first ?? ''), 'a scale keeps the task up to date');
    await serviceCliOk(['update', '-d', '--image', 'busybox:1.36', '--env-add', 'X=1', 'raw2']);
    const updated = await inspect('raw2');
    assert.equal(updated.Spec.TaskTemplate.ContainerSpec.Image, 'busybox:1.36');
    assert.deepEqual(updated.Spec.TaskTemplate.ContainerSpec.Env, ['X=1']);
    assert.ok(!(await upToDate()).includes(first ?? ''), 'an image change makes the task out of date');
    // the CLI's own updates send the image as busybox:latest (dockerd shows the same)
    assert.equal(updated.PreviousSpec.TaskTemplate.ContainerSpec.Image, 'busybox:latest');
    // a new spec clears the last UpdateStatus; the orchestrator may already have begun its update
    assert.ok(
      updated.UpdateStatus === undefined || updated.UpdateStatus.State === 'updating',
      JSON.stringify(updated.UpdateStatus),
    );
    assert.equal(await serviceCliOk(['rollback', '-d', 'raw2']), 'raw2');
    const back = await inspect('raw2');
    assert.equal(back.Spec.TaskTemplate.ContainerSpec.Image, 'busybox:latest');
    assert.equal(back.PreviousSpec.TaskTemplate.ContainerSpec.Image, 'busybox:1.36');
    // as the API wrote it, unless the orchestrator's rollback already moved it on
    assert.match(back.UpdateStatus.State, /^rollback_(started|paused|completed)$/);
    if (back.UpdateStatus.State === 'rollback_started') {
      assert.equal(back.UpdateStatus.Message, 'manually requested rollback');
    }
    await serviceCliOk(['update', '-d', '--force', 'raw2']);
    assert.equal((await inspect('raw2')).Spec.TaskTemplate.ForceUpdate, 1);
  });

  it('lists services with filters and status, and removes them', async () => {
    const list = async (filters: unknown, status = false) =>
      (
        await api(
          'GET',
          `/v1.41/services?status=${status}&filters=${encodeURIComponent(JSON.stringify(filters))}`,
        )
      ).json as { Spec: { Name: string }; ServiceStatus?: unknown }[];
    assert.deepEqual((await list({ name: ['raw'] })).map((s) => s.Spec.Name).sort(), ['raw1', 'raw2']);
    assert.deepEqual(
      (await list({ label: ['a=b'] })).map((s) => s.Spec.Name),
      ['raw2'],
    );
    assert.deepEqual(
      (await list({ label: ['a'] })).map((s) => s.Spec.Name),
      ['raw2'],
    );
    assert.deepEqual(
      (await list({ mode: ['replicated-job'] })).map((s) => s.Spec.Name),
      ['job1'],
    );
    const raw1 = (await inspect('raw1')).ID;
    assert.deepEqual(
      (await list({ id: [raw1.slice(0, 5)] })).map((s) => s.Spec.Name),
      ['raw1'],
    );
    const bad = await api('GET', `/v1.41/services?filters=${encodeURIComponent('{"foo":["a"]}')}`);
    assert.equal(bad.status, 400);
    assert.equal(message(bad), "Invalid filter 'foo'");
    const [st] = await list({ name: ['raw2'] }, true);
    assert.deepEqual(st?.ServiceStatus, { RunningTasks: 0, DesiredTasks: 2, CompletedTasks: 0 });
    const [noSt] = await list({ name: ['raw2'] });
    assert.equal(noSt?.ServiceStatus, undefined);
    const old = (await api('GET', '/v1.40/services?status=true')).json as { ServiceStatus?: unknown }[];
    assert.ok(old.every((s) => s.ServiceStatus === undefined));
    const ls = await engine.dockerOk([
      'service',
      'ls',
      '--filter',
      'name=job1',
      '--format',
      '{{.Name}} {{.Mode}} {{.Replicas}}',
    ]);
    assert.equal(ls, 'job1 replicated job 0/1 (0/1 completed)');

    assert.equal((await api('DELETE', '/v1.41/services/raw1')).status, 200);
    const gone = await api('DELETE', '/v1.41/services/raw1');
    assert.equal(gone.status, 404);
    assert.equal(message(gone), 'service raw1 not found');
    // its name and its port are free again
    const again = await create({
      Name: 'raw1',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' } },
      EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 30000 }] },
    });
    assert.equal(again.status, 201, message(again));
    assert.equal((await api('GET', '/v1.41/tasks/nope')).status, 404);
    assert.equal(message(await api('GET', '/v1.41/tasks/nope')), 'task nope not found');
  });

  it("emits service, secret and config events from the etcd watch, with moby's attributes", async () => {
    const since = Math.floor(Date.now() / 1000);
    await engine.dockerOk(['secret', 'create', 'ev-s', '-'], { input: 'x' });
    await engine.dockerOk(['config', 'create', 'ev-c', '-'], { input: 'x' });
    const id = await engine.dockerOk([
      'service',
      'create',
      '-d',
      '-q',
      '--name',
      'ev',
      '--no-resolve-image',
      'busybox',
    ]);
    await serviceCliOk(['update', '-d', '--no-resolve-image', '--image', 'busybox:1.36', 'ev']);
    await serviceCliOk(['scale', '-d', 'ev=3']);
    await engine.dockerOk(['service', 'rm', 'ev']);
    await engine.dockerOk(['secret', 'rm', 'ev-s']);
    await engine.dockerOk(['config', 'rm', 'ev-c']);
    await sleep(300);
    const format =
      '{{.Type}} {{.Action}} {{.Actor.ID}} {{.Scope}} {{index .Actor.Attributes "name"}} {{index .Actor.Attributes "image.old"}} {{index .Actor.Attributes "image.new"}} {{index .Actor.Attributes "replicas.old"}} {{index .Actor.Attributes "replicas.new"}}|{{index .Actor.Attributes "updatestate.new"}}';
    const services = (
      await engine.events(since, format, ['scope=swarm', 'type=service', 'service=ev'])
    ).split('\n');
    // the orchestrator's rolling update writes the service's UpdateStatus too: those updates carry
    // `updatestate.new` (as dockerd's), and nothing else changed
    const [byOrchestrator, byUser] = [
      services.filter((l) => !l.endsWith('|')),
      services.filter((l) => l.endsWith('|')),
    ];
    for (const l of byOrchestrator) {
      assert.match(l, new RegExp(`^service update ${id} swarm ev +\\|(updating|completed|paused)$`));
    }
    assert.deepEqual(
      byUser.map((l) => l.slice(0, -1).trim()),
      [
        `service create ${id} swarm ev`,
        `service update ${id} swarm ev busybox:latest busybox:1.36`,
        `service update ${id} swarm ev   1 3`,
        `service remove ${id} swarm ev`,
      ],
    );
    const objects = (
      await engine.events(since, '{{.Type}} {{.Action}} {{index .Actor.Attributes "name"}}', ['scope=swarm'])
    )
      .split('\n')
      // this test's objects only: `since` is whole seconds, the test before may have removed its own in that second
      .filter((l) => !l.startsWith('service') && !l.startsWith('node') && / ev-[sc]$/.test(l));
    assert.deepEqual(objects, [
      'secret create ev-s',
      'config create ev-c',
      'secret remove ev-s',
      'config remove ev-c',
    ]);
  });

  it('lists tasks with the filters the CLI uses, and docker service ps shows them', async () => {
    // the orchestrator and the agent make the tasks: two running, then a forced update that
    // replaces one slot and waits an hour before the other: a shut-down task, a new one, an old one
    await ensureBusybox(engine, 'pstbox:1');
    const created = await create({
      Name: 'pst',
      Labels: {},
      TaskTemplate: {
        ContainerSpec: { Image: 'pstbox:1', Command: ['sleep', '300'], StopGracePeriod: 500_000_000 },
      },
      Mode: { Replicated: { Replicas: 2 } },
      UpdateConfig: { Parallelism: 1, Delay: 3600 * 1e9, Order: 'stop-first' },
    });
    assert.equal(created.status, 201, message(created));
    const svc = created.json.ID as string;
    const node = (await engine.dockerOk(['info', '--format', '{{.Swarm.NodeID}}'])).trim();
    const hostname = JSON.parse(await engine.dockerOk(['node', 'inspect', 'self']))[0].Description.Hostname;
    type Task = { ID: string; Slot: number; Status: { State: string } };
    const list = async (filters: unknown): Promise<Task[]> => {
      const r = await api('GET', `/v1.41/tasks?filters=${encodeURIComponent(JSON.stringify(filters))}`);
      assert.equal(r.status, 200, message(r));
      return r.json as Task[];
    };
    const ids = async (filters: unknown) => (await list(filters)).map((t) => t.ID).sort();
    await eventually(
      'two running tasks',
      async () => {
        const ts = await list({ service: ['pst'] });
        return ts.length === 2 && ts.every((t) => t.Status.State === 'running');
      },
      30_000,
      100,
    );
    await serviceCliOk(['update', '-d', '--force', '--no-resolve-image', 'pst']);
    let all: Task[] = [];
    await eventually(
      'one slot replaced',
      async () => {
        all = await list({ service: ['pst'] });
        const running = all.filter((t) => t.Status.State === 'running');
        return all.length === 3 && running.length === 2 && all.some((t) => t.Status.State === 'shutdown');
      },
      30_000,
      100,
    );
    const old = all.find((t) => t.Status.State === 'shutdown') as Task;
    const fresh = all.find((t) => t.Slot === old.Slot && t.ID !== old.ID) as Task;
    const left = all.find((t) => t.Slot !== old.Slot) as Task;
    assert.ok(fresh && left, JSON.stringify(all));
    const sorted = (...ts: Task[]) => ts.map((t) => t.ID).sort();

    assert.deepEqual(await ids({ service: ['pst'] }), sorted(old, fresh, left));
    assert.deepEqual(await ids({ service: [svc] }), sorted(old, fresh, left));
    assert.deepEqual(await ids({ service: ['pst'], 'desired-state': ['running'] }), sorted(fresh, left));
    assert.deepEqual(await ids({ service: ['pst'], 'desired-state': ['shutdown'] }), sorted(old));
    assert.deepEqual(await ids({ service: ['pst'], '_up-to-date': ['true'] }), sorted(fresh));
    assert.deepEqual(await ids({ name: [`pst.${old.Slot}`] }), sorted(old, fresh));
    assert.deepEqual(await ids({ node: [hostname], service: ['pst'] }), sorted(old, fresh, left));
    assert.deepEqual(await ids({ node: [node], id: [left.ID.slice(0, 6)] }), sorted(left));
    // swarmkit's tasks carry no labels of their own
    assert.deepEqual(await ids({ service: ['pst'], label: ['tier=one'] }), []);
    const badState = await api(
      'GET',
      `/v1.41/tasks?filters=${encodeURIComponent('{"desired-state":["a"]}')}`,
    );
    assert.equal(badState.status, 400);
    assert.equal(message(badState), "Invalid desired-state filter: 'a'");
    const badService = await api('GET', `/v1.41/tasks?filters=${encodeURIComponent('{"service":["nope"]}')}`);
    assert.equal(badService.status, 404);
    assert.equal(message(badService), 'service nope not found');

    const one = (await api('GET', `/v1.41/tasks/${old.ID}`)).json;
    assert.deepEqual(Object.keys(one).slice(0, 3), ['ID', 'Version', 'CreatedAt']);
    assert.equal(one._, undefined);
    assert.ok(one.Version.Index > 0);

    const [status] = (
      await api('GET', `/v1.41/services?status=true&filters=${encodeURIComponent('{"name":["pst"]}')}`)
    ).json;
    assert.deepEqual(status.ServiceStatus, { RunningTasks: 2, DesiredTasks: 2, CompletedTasks: 0 });
    const ls = await engine.dockerOk(['service', 'ls', '--filter', 'name=pst', '--format', '{{.Replicas}}']);
    assert.equal(ls, '2/2');

    const ps = (await engine.dockerOk(['service', 'ps', '--no-trunc', 'pst'])).split('\n');
    assert.match(ps[0] ?? '', /^ID +NAME +IMAGE +NODE +DESIRED STATE +CURRENT STATE +ERROR +PORTS$/);
    const row = (t: Task, prefix: string, state: string) =>
      new RegExp(
        `^${t.ID} +${prefix}pst\\.${t.Slot} +pstbox:1 +${hostname} +${state} +${state} (less than a second|\\d+ seconds?) ago`,
      );
    const rows =
      old.Slot < left.Slot
        ? [row(fresh, '', 'Running'), row(old, ' \\\\_ ', 'Shutdown'), row(left, '', 'Running')]
        : [row(left, '', 'Running'), row(fresh, '', 'Running'), row(old, ' \\\\_ ', 'Shutdown')];
    for (const [i, re] of rows.entries()) assert.match(ps[i + 1] ?? '', re);
    const q = await engine.dockerOk(['service', 'ps', '-q', '--filter', 'desired-state=running', 'pst']);
    assert.deepEqual(q.split('\n').sort(), sorted(fresh, left));
    assert.equal(await engine.dockerOk(['service', 'rm', 'pst']), 'pst');
  });

  it("answers the CLI's /distribution call so that it warns and goes on, as with dockerd here", async () => {
    const r = await engine.docker(['service', 'create', '-d', '--name', 'plain', 'busybox'], {
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout.trim(), /^[0-9a-z]{25}$/);
    assert.match(
      r.stderr,
      /^image busybox:latest could not be accessed on a registry to record\nits digest\./,
    );
    assert.equal((await inspect('plain')).Spec.TaskTemplate.ContainerSpec.Image, 'busybox:latest');
    assert.equal(await engine.dockerOk(['service', 'rm', 'plain']), 'plain');
  });
});
