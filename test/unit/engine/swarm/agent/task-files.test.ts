import assert from 'node:assert/strict';
import { access, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { TaskFiles } from '../../../../../src/engine/swarm/agent/task-files.js';
import type {
  AssignedObject,
  AssignedTask,
} from '../../../../../src/engine/swarm/cluster-api/assignments.types.js';
import type { ContainerSpec } from '../../../../../src/engine/swarm/services/service.types.js';

function assigned(spec: ContainerSpec): AssignedTask {
  return {
    Task: {
      ID: 'task1',
      CreatedAt: '',
      UpdatedAt: '',
      Labels: {},
      Spec: { ContainerSpec: spec },
      ServiceID: 's',
      NodeID: 'n',
      Status: { Timestamp: '', State: 'assigned', Message: '' },
      DesiredState: 'running',
    },
    Service: { ID: 's', Name: 'web', Labels: {}, HostPorts: [] },
  };
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function setup() {
  const dir = await mkdtemp(join(tmpdir(), 'berth-taskfiles-'));
  dirs.push(dir);
  const mounted: string[] = [];
  const ops: string[] = [];
  const files = new TaskFiles(join(dir, 'tasks'), {
    mount: async (o) => {
      ops.push(`mount ${o.type} ${o.options} ${o.target}`);
      mounted.push(o.target);
    },
    unmount: async (t) => {
      ops.push(`unmount ${t}`);
      mounted.splice(mounted.indexOf(t), 1);
    },
    mountsUnder: async (d) => mounted.filter((m) => m === d || m.startsWith(`${d}/`)),
  });
  return { dir, files, ops, mounted };
}

describe('task secret and config files', () => {
  it('writes each file in the task’s tmpfs with its mode and owner, and says where it goes', async () => {
    const t = await setup();
    const secrets = new Map([['sec1', { ID: 'sec1', Name: 's1', Data: b64('secret') }]]);
    const configs = new Map([['cfg1', { ID: 'cfg1', Name: 'c1', Data: b64('config') }]]);
    const mounts = await t.files.prepare(
      assigned({
        Secrets: [
          { SecretID: 'sec1', SecretName: 's1', File: { Name: 's1', UID: '0', GID: '0', Mode: 0o400 } },
          { SecretID: 'sec1', SecretName: 's1', File: { Name: '/etc/abs', UID: '12', GID: '34' } },
        ],
        Configs: [
          { ConfigID: 'cfg1', ConfigName: 'c1' },
          { ConfigID: 'cfg1', ConfigName: 'c1', Runtime: {} },
        ],
      }),
      secrets,
      configs,
    );
    const base = join(t.dir, 'tasks', 'task1');
    assert.deepEqual(t.ops, [`mount tmpfs mode=0700,size=64m ${base}`]);
    assert.deepEqual(mounts, [
      { source: join(base, 'file-0'), target: '/run/secrets/s1' },
      { source: join(base, 'file-1'), target: '/etc/abs' },
      { source: join(base, 'file-2'), target: '/c1' },
    ]);
    assert.equal(await readFile(join(base, 'file-0'), 'utf8'), 'secret');
    const s0 = await stat(join(base, 'file-0'));
    assert.equal(s0.mode & 0o777, 0o400);
    const s1 = await stat(join(base, 'file-1'));
    assert.equal(s1.mode & 0o777, 0o444, 'default mode');
    assert.deepEqual([s1.uid, s1.gid], [12, 34]);
    assert.equal(await readFile(join(base, 'file-2'), 'utf8'), 'config');

    await t.files.remove('task1');
    assert.deepEqual(t.mounted, []);
    await assert.rejects(access(base));
  });

  it('needs no tmpfs for a task without secrets or configs, and refuses a missing secret', async () => {
    const t = await setup();
    assert.deepEqual(await t.files.prepare(assigned({}), new Map(), new Map()), []);
    assert.deepEqual(t.ops, []);
    await assert.rejects(
      t.files.prepare(assigned({ Secrets: [{ SecretID: 'gone', SecretName: 'gs' }] }), new Map(), new Map()),
      /secret gs not found/,
    );
  });

  it('removes every task’s files when the node leaves', async () => {
    const t = await setup();
    const secrets = new Map([['sec1', { ID: 'sec1', Name: 's1', Data: b64('x') }]]);
    const spec = { Secrets: [{ SecretID: 'sec1', SecretName: 's1' }] };
    await t.files.prepare(assigned(spec), secrets, new Map());
    const other = assigned(spec);
    other.Task.ID = 'task2';
    await t.files.prepare(other, secrets, new Map());
    assert.equal(t.mounted.length, 2);
    await t.files.removeAll();
    assert.deepEqual(t.mounted, []);
    await assert.rejects(access(join(t.dir, 'tasks')));
  });

  it('expands a templated secret or config for the task, with its env and its other references (no node description, as dockerd)', async () => {
    const t = await setup();
    const golang = { Name: 'golang' };
    const secrets = new Map([
      ['sec1', { ID: 'sec1', Name: 'pw', Data: b64('hunter2') }],
      [
        'sec2',
        { ID: 'sec2', Name: 'tpl', Data: b64('{{.Service.Name}}:{{secret "db"}}'), Templating: golang },
      ],
    ]);
    const configs = new Map([
      [
        'cfg1',
        {
          ID: 'cfg1',
          Name: 'app.conf',
          Data: b64(
            'node={{.Node.ID}}@{{.Node.Hostname}}{{.Node.Platform}} slot={{.Task.Slot}} mode={{env "MODE"}} raw={{secret "db"}}',
          ),
          Templating: golang,
        },
      ],
    ]);
    const task = assigned({
      Env: ['MODE=prod', 'X=1'],
      Secrets: [
        { SecretID: 'sec1', SecretName: 'pw', File: { Name: 'db' } },
        { SecretID: 'sec2', SecretName: 'tpl', File: { Name: 'tpl' } },
      ],
      Configs: [{ ConfigID: 'cfg1', ConfigName: 'app.conf', File: { Name: '/app.conf' } }],
    });
    task.Task.Slot = 2;
    const mounts = await t.files.prepare(task, secrets, configs);
    const read = (i: number) => readFile((mounts[i] as { source: string }).source, 'utf8');
    assert.equal(await read(1), 'web:hunter2');
    assert.equal(await read(0), 'hunter2');
    assert.equal(await read(2), 'node=n@{ } slot=2 mode=prod raw=hunter2');
  });

  it('fails the task on a reference it does not have, or a template that does not parse', async () => {
    const t = await setup();
    const secrets = new Map<string, AssignedObject>([
      ['sec2', { ID: 'sec2', Name: 'tpl', Data: b64('{{secret "other"}}'), Templating: { Name: 'golang' } }],
    ]);
    const spec = { Secrets: [{ SecretID: 'sec2', SecretName: 'tpl', File: { Name: 'tpl' } }] };
    await assert.rejects(
      t.files.prepare(assigned(spec), secrets, new Map()),
      (e: Error) =>
        e.message ===
        'failed to expand templated secret sec2: template: expansion:1:2: executing "expansion" at <secret "other">: error calling secret: secret target other not found',
    );
    // a reference goes by its target (File.Name), not the secret's name: swarmkit's rule
    secrets.set('sec1', { ID: 'sec1', Name: 'other', Data: b64('x') });
    const both = {
      Secrets: [...spec.Secrets, { SecretID: 'sec1', SecretName: 'other', File: { Name: 'db' } }],
    };
    await assert.rejects(
      t.files.prepare(assigned(both), secrets, new Map()),
      /secret target other not found/,
    );
    secrets.set('sec2', {
      ID: 'sec2',
      Name: 'tpl',
      Data: b64('{{ .Task.ID '),
      Templating: { Name: 'golang' },
    });
    await assert.rejects(
      t.files.prepare(assigned(spec), secrets, new Map()),
      /templated secret sec2: template: expansion:1: unclosed action/,
    );
    assert.deepEqual(t.ops, [], 'nothing mounted for a task that fails');
  });
});
