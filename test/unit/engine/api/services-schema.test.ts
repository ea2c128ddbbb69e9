import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeServiceSpec } from '../../../../src/engine/api/schema/services.schema.js';
import { specForVersion } from '../../../../src/engine/api/services.versions.js';
import type { ServiceSpec } from '../../../../src/engine/swarm/services/service.types.js';

describe('the service spec on the wire', () => {
  it("decodes as Go does: case-folded keys, unknown keys dropped, Go's type errors", () => {
    const spec = decodeServiceSpec({
      name: 'web',
      taskTemplate: { containerSpec: { image: 'busybox', bogus: 1 } },
      UpdateConfig: { MaxFailureRatio: 0.1 },
    });
    assert.deepEqual(spec, {
      Name: 'web',
      TaskTemplate: { ContainerSpec: { Image: 'busybox' } },
      UpdateConfig: { MaxFailureRatio: 0.1 },
    });
    assert.throws(
      () => decodeServiceSpec({ TaskTemplate: { ContainerSpec: { Env: 'A=1' } } }),
      /json: cannot unmarshal string into Go struct field ContainerSpec\.TaskTemplate\.ContainerSpec\.Env of type \[\]string/,
    );
    assert.throws(
      () => decodeServiceSpec({ EndpointSpec: { Ports: [{ TargetPort: -1 }] } }),
      /cannot unmarshal number -1 into Go struct field PortConfig\.EndpointSpec\.Ports\.TargetPort of type uint32/,
    );
    assert.throws(
      () => decodeServiceSpec('x'),
      /json: cannot unmarshal string into Go value of type swarm\.ServiceSpec/,
    );
    assert.throws(
      () => decodeServiceSpec({ Mode: { global: { replicas: 1 } } }),
      /replicas can only be used/,
    );
    assert.deepEqual(decodeServiceSpec(null), {});
  });

  it("drops what the request's version does not have, as moby's adjustForAPIVersion", () => {
    const spec: ServiceSpec = {
      Name: 'a',
      TaskTemplate: {
        ContainerSpec: {
          Image: 'busybox',
          Sysctls: { a: 'b' },
          CapabilityAdd: ['X'],
          OomScoreAdj: 5,
          Healthcheck: { StartInterval: 1 },
          Privileges: { NoNewPrivileges: true },
          Mounts: [{ Type: 'tmpfs', Target: '/t', TmpfsOptions: { Options: [['noexec']] } }],
        },
        Placement: { MaxReplicas: 2 },
        Resources: { Limits: { Pids: 9 } },
      },
      Mode: { GlobalJob: {} },
    };
    assert.equal(specForVersion(spec, '1.46'), spec);
    const v145 = specForVersion(spec, '1.45').TaskTemplate?.ContainerSpec;
    assert.equal(v145?.OomScoreAdj, undefined);
    assert.deepEqual(v145?.Mounts?.[0]?.TmpfsOptions, {});
    assert.equal(v145?.Privileges?.NoNewPrivileges, true);
    const v140 = specForVersion(spec, '1.40');
    assert.deepEqual(v140.Mode, {});
    assert.equal(v140.TaskTemplate?.ContainerSpec?.CapabilityAdd, undefined);
    assert.deepEqual(v140.TaskTemplate?.ContainerSpec?.Sysctls, { a: 'b' });
    assert.equal(v140.TaskTemplate?.Resources?.Limits?.Pids, undefined);
    assert.equal(v140.TaskTemplate?.ContainerSpec?.Healthcheck?.StartInterval, undefined);
    const v139 = specForVersion(spec, '1.39');
    assert.equal(v139.TaskTemplate?.ContainerSpec?.Sysctls, undefined);
    assert.equal(v139.TaskTemplate?.Placement?.MaxReplicas, undefined);
    assert.deepEqual(spec.TaskTemplate?.ContainerSpec?.Sysctls, { a: 'b' }, 'the given spec is not changed');
  });
});
