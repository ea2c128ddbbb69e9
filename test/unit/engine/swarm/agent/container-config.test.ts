import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  configTarget,
  secretTarget,
  stopTimeoutSeconds,
  taskContainer,
  taskContainerName,
} from '../../../../../src/engine/swarm/agent/container-config.js';
import { splitReference } from '../../../../../src/engine/swarm/agent/executor.js';
import { expandTemplate, type TemplateContext } from '../../../../../src/engine/swarm/agent/templates.js';
import type { AssignedTask } from '../../../../../src/engine/swarm/cluster-api/assignments.types.js';
import type { TaskSpec } from '../../../../../src/engine/swarm/services/service.types.js';

const node = { ID: 'node1', Hostname: 'h1' };

function assigned(
  spec: TaskSpec,
  over: Partial<AssignedTask['Task']> = {},
  ports: AssignedTask['Service']['HostPorts'] = [],
): AssignedTask {
  return {
    Task: {
      ID: 'task1',
      CreatedAt: '',
      UpdatedAt: '',
      Labels: {},
      Spec: spec,
      ServiceID: 'svc1',
      Slot: 3,
      NodeID: 'node1',
      Status: { Timestamp: '', State: 'assigned', Message: '' },
      DesiredState: 'running',
      ...over,
    },
    Service: { ID: 'svc1', Name: 'web', Labels: { tier: 'front' }, HostPorts: ports },
  };
}

describe('task container names and labels', () => {
  it('names replicated tasks by slot and global ones by node', () => {
    assert.equal(taskContainerName(assigned({})), 'web.3.task1');
    assert.equal(taskContainerName(assigned({}, { Slot: undefined })), 'web.node1.task1');
  });

  it('puts the swarm labels over the spec labels, and the stack namespace of the service', () => {
    const a = assigned({
      ContainerSpec: { Image: 'busybox', Labels: { x: '1', 'com.docker.swarm.task.id': 'forged' } },
    });
    a.Service.Labels['com.docker.stack.namespace'] = 'st';
    const { config } = taskContainer(a, node, 'busybox', []);
    assert.deepEqual(config.Labels, {
      x: '1',
      'com.docker.stack.namespace': 'st',
      'com.docker.swarm.node.id': 'node1',
      'com.docker.swarm.service.id': 'svc1',
      'com.docker.swarm.service.name': 'web',
      'com.docker.swarm.task': '',
      'com.docker.swarm.task.id': 'task1',
      'com.docker.swarm.task.name': 'web.3.task1',
    });
  });
});

describe('ContainerSpec → container config (moby executor)', () => {
  it('maps Command to Entrypoint and Args to Cmd, or Args alone to Cmd', () => {
    const both = taskContainer(
      assigned({ ContainerSpec: { Command: ['sh', '-c'], Args: ['echo hi'] } }),
      node,
      'b',
      [],
    );
    assert.deepEqual(both.config.Entrypoint, ['sh', '-c']);
    assert.deepEqual(both.config.Cmd, ['echo hi']);
    const cmdOnly = taskContainer(assigned({ ContainerSpec: { Command: ['top'] } }), node, 'b', []);
    assert.deepEqual(cmdOnly.config.Entrypoint, ['top']);
    assert.deepEqual(cmdOnly.config.Cmd, []);
    const args = taskContainer(assigned({ ContainerSpec: { Args: ['-x'] } }), node, 'b', []);
    assert.equal(args.config.Entrypoint, undefined);
    assert.deepEqual(args.config.Cmd, ['-x']);
  });

  it('maps every field of the spec', () => {
    const spec: TaskSpec = {
      ContainerSpec: {
        Image: 'busybox:latest',
        Env: ['A=1', 'N={{.Node.Hostname}}'],
        Dir: '/w',
        User: 'nobody',
        Groups: ['wheel'],
        Hostname: '{{.Service.Name}}-{{.Task.Slot}}',
        TTY: true,
        OpenStdin: true,
        ReadOnly: true,
        Init: true,
        StopSignal: 'SIGINT',
        StopGracePeriod: 2_500_000_000,
        Healthcheck: { Test: ['CMD', 'true'], Interval: 1e9, Retries: 2 },
        Hosts: ['10.0.0.1 db db.local', 'bogus'],
        DNSConfig: { Nameservers: ['1.1.1.1'], Search: ['s'], Options: ['ndots:1'] },
        Sysctls: { 'net.core.somaxconn': '1024' },
        CapabilityAdd: ['NET_ADMIN'],
        CapabilityDrop: ['CHOWN'],
        Ulimits: [{ Name: 'nofile', Soft: 10, Hard: 20 }],
        OomScoreAdj: 100,
        Privileges: {
          NoNewPrivileges: true,
          Seccomp: { Mode: 'unconfined' },
          AppArmor: { Mode: 'disabled' },
        },
        Mounts: [
          { Type: 'volume', Source: 'vol-{{.Task.Slot}}', Target: '/data' },
          { Type: 'tmpfs', Target: '/t', TmpfsOptions: { SizeBytes: 1024 } },
        ],
      },
      Resources: { Limits: { NanoCPUs: 500_000_000, MemoryBytes: 64 << 20, Pids: 50 } },
      LogDriver: { Name: 'json-file', Options: { 'max-size': '1m' } },
    };
    const c = taskContainer(
      assigned(spec, {}, [
        { Protocol: 'tcp', TargetPort: 80, PublishedPort: 8080, PublishMode: 'host' },
        { Protocol: 'udp', TargetPort: 53, PublishMode: 'host' },
      ]),
      node,
      'busybox:latest',
      [{ source: '/x/file-0', target: '/run/secrets/s' }],
    );
    assert.equal(c.name, 'web.3.task1');
    assert.deepEqual(
      { ...c.config, Labels: undefined },
      {
        Image: 'busybox:latest',
        Labels: undefined,
        Env: ['A=1', 'N=h1'],
        Tty: true,
        OpenStdin: true,
        Hostname: 'web-3',
        User: 'nobody',
        WorkingDir: '/w',
        StopSignal: 'SIGINT',
        Healthcheck: { Test: ['CMD', 'true'], Interval: 1e9, Retries: 2 },
        ExposedPorts: { '80/tcp': {}, '53/udp': {} },
      },
    );
    assert.deepEqual(c.hostConfig, {
      Mounts: [
        { Type: 'volume', Source: 'vol-3', Target: '/data' },
        { Type: 'tmpfs', Target: '/t', TmpfsOptions: { SizeBytes: 1024 } },
        { Type: 'bind', Source: '/x/file-0', Target: '/run/secrets/s', ReadOnly: true },
      ],
      GroupAdd: ['wheel'],
      ReadonlyRootfs: true,
      Init: true,
      Sysctls: { 'net.core.somaxconn': '1024' },
      CapAdd: ['NET_ADMIN'],
      CapDrop: ['CHOWN'],
      Ulimits: [{ Name: 'nofile', Soft: 10, Hard: 20 }],
      OomScoreAdj: 100,
      Dns: ['1.1.1.1'],
      DnsSearch: ['s'],
      DnsOptions: ['ndots:1'],
      ExtraHosts: ['db:10.0.0.1'],
      SecurityOpt: ['seccomp=unconfined', 'apparmor=unconfined', 'no-new-privileges=true'],
      Memory: 64 << 20,
      NanoCpus: 500_000_000,
      PidsLimit: 50,
      LogConfig: { Type: 'json-file', Config: { 'max-size': '1m' } },
      PortBindings: { '80/tcp': [{ HostPort: '8080' }], '53/udp': [{}] },
    });
    assert.equal(stopTimeoutSeconds(assigned(spec)), 3);
    assert.equal(stopTimeoutSeconds(assigned({})), 10);
  });

  it('puts secrets under /run/secrets and configs at the root, absolute names as given', () => {
    assert.equal(secretTarget('s1'), '/run/secrets/s1');
    assert.equal(secretTarget('/etc/s1'), '/etc/s1');
    assert.equal(configTarget('c1'), '/c1');
    assert.equal(configTarget('/etc/c.conf'), '/etc/c.conf');
  });

  it('splits a reference for a pull', () => {
    assert.deepEqual(splitReference('busybox'), { name: 'busybox', tag: 'latest' });
    assert.deepEqual(splitReference('localhost:5000/a/b:1'), { name: 'localhost:5000/a/b', tag: '1' });
    assert.deepEqual(splitReference('localhost:5000/b'), { name: 'localhost:5000/b', tag: 'latest' });
    assert.deepEqual(splitReference(`busybox:latest@sha256:${'a'.repeat(64)}`), {
      name: 'busybox',
      tag: `sha256:${'a'.repeat(64)}`,
    });
  });
});

describe('templates', () => {
  const ctx: TemplateContext = {
    Service: { ID: 's', Name: 'web', Labels: { b: '2', a: '1' } },
    Node: { ID: 'n', Hostname: 'h', Platform: { OS: 'linux', Architecture: 'x86_64' } },
    Task: { ID: 't', Name: 'web.1.t', Slot: '1' },
  };

  it('expands swarmkit placeholders', () => {
    assert.equal(
      expandTemplate(
        '{{.Service.ID}} {{.Service.Name}} {{.Node.ID}} {{.Node.Hostname}} {{.Node.Platform.OS}} {{.Node.Platform.Architecture}} {{.Task.ID}} {{.Task.Name}} {{ .Task.Slot }}',
        ctx,
      ),
      's web n h linux x86_64 t web.1.t 1',
    );
    assert.equal(expandTemplate('{{.Service.Labels}}', ctx), 'map[a:1 b:2]');
    assert.equal(expandTemplate('{{index .Service.Labels "b"}}-{{index .Service.Labels "z"}}', ctx), '2-');
    assert.equal(expandTemplate('plain', ctx), 'plain');
  });

  it('fails on what it does not know', () => {
    assert.throws(() => expandTemplate('{{.Task.Nope}}', ctx), /can't evaluate field Nope in type struct/);
    assert.throws(() => expandTemplate('{{nope "x"}}', ctx), /function "nope" not defined/);
    // Go's builtins are there as in swarmkit
    assert.equal(expandTemplate('{{printf "%s-x" .Task.Slot}}', ctx), `${ctx.Task.Slot}-x`);
  });
});
