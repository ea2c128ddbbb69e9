import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestEngine } from '../../helpers/engine.js';
import { eventuallyValue } from '../../helpers/eventually.js';
import { leaveAndDestroy, serviceTasks, startOneManagerSwarm } from '../../helpers/swarm-one.js';

/**
 * Templated secrets and configs (issue 14 §7): `docker secret|config create --template-driver
 * golang` objects are expanded per task on its node, as swarmkit's agent does (template/context.go)
 * under dockerd's executor (checked against dockerd 20.10: the same template renders the same, the
 * node's hostname and platform empty): the service, node and task placeholders, `env` (the container's Env), `secret`/`config` (another
 * reference of the same task, by its target name); a reference the task does not have fails the
 * task with the template's error.
 */

describe('swarm templated secrets and configs (one manager)', () => {
  let engine: TestEngine;
  let nodeId: string;

  before(async () => {
    ({ engine, nodeId } = await startOneManagerSwarm());
  });
  after(() => leaveAndDestroy(engine));

  it('renders each task’s files from the templates', async () => {
    await engine.dockerOk(['secret', 'create', 'tpl_pw', '-'], { input: 'hunter2' });
    await engine.dockerOk(['secret', 'create', '--template-driver', 'golang', 'tpl_secret', '-'], {
      input: 'svc={{.Service.Name}} pw={{secret "db_pw"}} conf={{config "base"}}\n',
    });
    await engine.dockerOk(['config', 'create', 'tpl_base', '-'], { input: 'port=80' });
    await engine.dockerOk(['config', 'create', '--template-driver', 'golang', 'tpl_conf', '-'], {
      input: [
        'service {{.Service.ID}} {{.Service.Name}} {{.Service.Labels}} {{index .Service.Labels "tier"}}',
        'node {{.Node.ID}} {{.Node.Hostname}} {{.Node.Platform.OS}} {{.Node.Platform.Architecture}}',
        'task {{.Task.ID}} {{.Task.Name}} {{.Task.Slot}}',
        'env {{env "MODE"}} [{{env "UNSET"}}]',
        '{{range $k, $v := .Service.Labels}}{{$k}}={{$v}};{{end}}',
        '{{printf "%q %d %v" .Service.Name 3 true}} {{len .Service.Labels}} {{print 1 2 "x"}} {{.Node.Platform}}',
        '{{join "," "a" "b"}} {{with .Node}}{{.Hostname}}{{end}} {{if eq .Task.Slot "1"}}one{{else}}other{{end}}',
      ].join('\n'),
    });
    const serviceId = await engine.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'tpl',
      '--label',
      'tier=front',
      '--label',
      'a=1',
      '--env',
      'MODE=prod',
      '--secret',
      'source=tpl_pw,target=db_pw',
      '--secret',
      'tpl_secret',
      '--config',
      'source=tpl_base,target=base',
      '--config',
      'source=tpl_conf,target=/etc/app.conf',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const [task] = await eventuallyValue(
      'the task running',
      () => serviceTasks(engine, 'tpl'),
      (t) => t.some((x) => x.Status.State === 'running'),
      60_000,
    );
    assert.ok(task);
    const cid = task.Status.ContainerStatus?.ContainerID ?? '';
    assert.equal(
      await engine.dockerOk(['exec', cid, 'cat', '/run/secrets/tpl_secret']),
      'svc=tpl pw=hunter2 conf=port=80',
    );
    assert.equal(
      await engine.dockerOk(['exec', cid, 'cat', '/etc/app.conf']),
      [
        `service ${serviceId} tpl map[a:1 tier:front] front`,
        // dockerd's executor renders these without the node's description: empty (20.10 too)
        `node ${nodeId}   `,
        `task ${task.ID} tpl.1.${task.ID} 1`,
        'env prod []',
        'a=1;tier=front;',
        '"tpl" 3 true 2 1 2x { }',
        'a,b  one',
      ].join('\n'),
    );
    // the raw ones as given
    assert.equal(await engine.dockerOk(['exec', cid, 'cat', '/run/secrets/db_pw']), 'hunter2');
    await engine.dockerOk(['service', 'rm', 'tpl']);
  });

  it('fails the task on a reference it does not have, with the template’s error', async () => {
    await engine.dockerOk(['secret', 'create', '--template-driver', 'golang', 'tpl_bad', '-'], {
      input: 'x={{secret "missing"}}',
    });
    const secretId = (await engine.dockerOk(['secret', 'inspect', '-f', '{{.ID}}', 'tpl_bad'])).trim();
    await engine.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'tplbad',
      '--secret',
      'tpl_bad',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const failed = await eventuallyValue(
      'the task rejected',
      () => serviceTasks(engine, 'tplbad'),
      (t) => t.some((x) => x.Status.State === 'rejected'),
      60_000,
    );
    const err = failed.find((x) => x.Status.State === 'rejected')?.Status.Err;
    assert.equal(
      err,
      `failed to expand templated secret ${secretId}: template: expansion:1:4: executing "expansion" at <secret "missing">: error calling secret: secret target missing not found`,
    );
    await engine.dockerOk(['service', 'rm', 'tplbad']);
  });
});
