import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cpuSharesRefusal,
  mountsForCrun,
  resourcesForCrun,
} from '../../../../src/engine/runtime/driver/crun-compat.js';
import { runcStyleMessage } from '../../../../src/engine/runtime/driver/oci-cli.js';

describe("crun's messages in runc's words", () => {
  it('a missing command, path or directory; a refused exec; a refused cgroup value', () => {
    assert.equal(
      runcStyleMessage('executable file `nope` not found in $PATH: No such file or directory'),
      'unable to start container process: exec: "nope": executable file not found in $PATH',
    );
    assert.equal(
      runcStyleMessage('executable file `/no/such` not found in $PATH: No such file or directory'),
      'unable to start container process: exec: "/no/such": stat /no/such: no such file or directory',
    );
    assert.equal(
      runcStyleMessage('chdir `/nonexist`: No such file or directory'),
      'unable to start container process: chdir to cwd ("/nonexist") set in config.json failed: no such file or directory',
    );
    assert.equal(
      runcStyleMessage('open executable: Permission denied', '/etc/hosts'),
      'unable to start container process: exec: "/etc/hosts": permission denied',
    );
    assert.equal(
      runcStyleMessage('writing file `cpu.rt_runtime_us`: Invalid argument'),
      'failed to write cpu.rt_runtime_us: invalid argument',
    );
    assert.equal(runcStyleMessage('something else: Bad things'), 'something else: Bad things');
  });
});

describe('specs as runc reads them, for crun', () => {
  it('of a mount flag and its opposite the last one stays', () => {
    const m = (options: string[]) => ({ destination: '/t', type: 'tmpfs', source: 'tmpfs', options });
    assert.deepEqual(mountsForCrun([m(['nosuid', 'nodev', 'noexec', 'exec'])]), [
      m(['nosuid', 'nodev', 'exec']),
    ]);
    assert.deepEqual(mountsForCrun([m(['rw', 'ro', 'rbind'])]), [m(['ro', 'rbind'])]);
    const same = m(['nosuid', 'noexec', 'mode=755']);
    assert.equal(mountsForCrun([same])[0], same);
  });

  it('cpu shares out of the kernel range are refused in runc words; a negative quota is left out', () => {
    assert.equal(cpuSharesRefusal({ cpu: { shares: 262145 } }), 'the maximum allowed cpu-shares is 262144');
    assert.equal(cpuSharesRefusal({ cpu: { shares: 1 } }), 'the minimum allowed cpu-shares is 2');
    assert.equal(cpuSharesRefusal({ cpu: { shares: 1024 } }), null);
    assert.equal(cpuSharesRefusal({}), null);
    assert.deepEqual(resourcesForCrun({ cpu: { quota: -1, period: 100000 } }), { cpu: { period: 100000 } });
    const kept = { cpu: { quota: 50000 } };
    assert.equal(resourcesForCrun(kept), kept);
  });
});
