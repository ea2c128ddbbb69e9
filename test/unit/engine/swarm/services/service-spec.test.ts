import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConstraints } from '../../../../../src/engine/swarm/services/constraints.js';
import {
  normalizeServiceSpec,
  replacesTasks,
  withDefaults,
} from '../../../../../src/engine/swarm/services/service-spec.js';
import { validateServiceSpec } from '../../../../../src/engine/swarm/services/service-validate.js';

describe('service specs as dockerd keeps them', () => {
  it('fills what dockerd always fills and leaves empty lists out', () => {
    const s = normalizeServiceSpec({
      Name: 'a',
      TaskTemplate: { ContainerSpec: { Image: 'busybox', Env: [], Labels: {}, Init: false } },
      Mode: { ReplicatedJob: { MaxConcurrent: 3 } },
      UpdateConfig: { Parallelism: 2 },
      EndpointSpec: { Ports: [{ TargetPort: 53, Protocol: 'udp' as const }] },
    });
    assert.deepEqual(s, {
      Name: 'a',
      Labels: {},
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox', Init: false, Isolation: 'default' },
        ForceUpdate: 0,
        Runtime: 'container',
      },
      Mode: { ReplicatedJob: { MaxConcurrent: 3, TotalCompletions: 3 } },
      UpdateConfig: { Parallelism: 2, FailureAction: 'pause', MaxFailureRatio: 0, Order: 'stop-first' },
      EndpointSpec: { Mode: 'vip', Ports: [{ Protocol: 'udp', TargetPort: 53, PublishMode: 'ingress' }] },
    });
    assert.throws(
      () => normalizeServiceSpec({ Name: 'a', TaskTemplate: {} }),
      /mismatched Runtime and \*Spec fields/,
    );
    // a nil entry of a list (`[null]`) is nothing, never a crash further on
    const nils = normalizeServiceSpec(
      JSON.parse(
        '{"Name":"a","TaskTemplate":{"ContainerSpec":{"Image":"b","Secrets":[null],"Mounts":[null]}}}',
      ),
    );
    assert.deepEqual(nils.TaskTemplate?.ContainerSpec, { Image: 'b', Isolation: 'default' });
    assert.throws(
      () =>
        normalizeServiceSpec({
          Name: 'a',
          TaskTemplate: { ContainerSpec: { Image: 'b' } },
          Mode: { Global: {}, GlobalJob: {} },
        }),
      /must specify only one service mode/,
    );
  });

  it('inserts swarmkit defaults only where a part is missing', () => {
    const s = normalizeServiceSpec({
      Name: 'a',
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox', StopGracePeriod: 1 },
        RestartPolicy: { Condition: 'none' },
      },
      RollbackConfig: { Parallelism: 4, Monitor: 7 },
    });
    const d = withDefaults(s);
    assert.equal(d.TaskTemplate?.ContainerSpec?.StopGracePeriod, 1);
    assert.deepEqual(d.TaskTemplate?.ContainerSpec?.DNSConfig, {});
    assert.deepEqual(d.TaskTemplate?.RestartPolicy, { Condition: 'none', Delay: 5e9, MaxAttempts: 0 });
    assert.deepEqual(d.RollbackConfig, {
      Parallelism: 4,
      FailureAction: 'pause',
      Monitor: 7,
      MaxFailureRatio: 0,
      Order: 'stop-first',
    });
    assert.equal(d.UpdateConfig?.Parallelism, 1);
    assert.deepEqual(d.EndpointSpec, { Mode: 'vip' });
    assert.equal(s.RollbackConfig?.Monitor, 7, 'the stored spec is not changed');
  });

  it('knows which changes replace tasks', () => {
    const base = normalizeServiceSpec({ Name: 'a', TaskTemplate: { ContainerSpec: { Image: 'busybox' } } });
    const labels = { ...base, Labels: { x: 'y' }, Mode: { Replicated: { Replicas: 5 } } };
    assert.equal(replacesTasks(base, labels), false);
    const forced = structuredClone(base);
    if (forced.TaskTemplate) forced.TaskTemplate.ForceUpdate = 1;
    assert.equal(replacesTasks(base, forced), true);
    assert.equal(
      replacesTasks(base, { ...base, EndpointSpec: { Mode: 'vip', Ports: [{ TargetPort: 1 }] } }),
      true,
    );
  });

  it("validates with swarmkit's words", () => {
    const ok = normalizeServiceSpec({ Name: 'a', TaskTemplate: { ContainerSpec: { Image: 'busybox' } } });
    validateServiceSpec(ok);
    const bad = (s: object, m: RegExp) =>
      assert.throws(() => validateServiceSpec(normalizeServiceSpec({ ...ok, ...s })), m);
    bad({ Name: 'a'.repeat(64) }, /name must be 63 characters or fewer/);
    bad({ Name: '-a' }, /name must be valid as a DNS name component/);
    bad(
      { TaskTemplate: { ContainerSpec: { Image: 'busybox', Healthcheck: { Interval: 5 } } } },
      /Interval in HealthConfig cannot be less than 1ms/,
    );
    bad(
      {
        TaskTemplate: {
          ContainerSpec: {
            Image: 'busybox',
            Secrets: [
              { SecretID: 'a', SecretName: 'a', File: { Name: 'f' } },
              { SecretID: 'b', SecretName: 'b', File: { Name: 'f' } },
            ],
          },
        },
      },
      /secret references 'a' and 'b' have a conflicting target: 'f'/,
    );
    bad(
      {
        TaskTemplate: { ContainerSpec: { Image: 'busybox', Configs: [{ ConfigID: 'a', ConfigName: 'a' }] } },
      },
      /malformed config reference, no target provided/,
    );
    bad(
      {
        EndpointSpec: {
          Ports: [
            { TargetPort: 1, PublishedPort: 9 },
            { TargetPort: 2, PublishedPort: 9 },
          ],
        },
      },
      /EndpointSpec: duplicate published ports provided/,
    );
  });

  it('parses placement constraints as swarmkit does', () => {
    assert.deepEqual(parseConstraints(['node.labels.zone == a b', 'node.role!=manager']), [
      { key: 'node.labels.zone', op: '==', value: 'a b' },
      { key: 'node.role', op: '!=', value: 'manager' },
    ]);
    assert.throws(
      () => parseConstraints(['node.role=manager']),
      /constraint expected one operator from ==, !=/,
    );
    assert.throws(() => parseConstraints(['1x==a']), /key '1x' is invalid/);
    assert.throws(() => parseConstraints(['node.role==a<b']), /value 'a<b' is invalid/);
  });
});
