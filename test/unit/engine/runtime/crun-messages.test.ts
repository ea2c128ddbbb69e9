import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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
