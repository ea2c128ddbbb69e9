import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { networkKeys } from '../../../src/engine/swarm/networks/network-keys.js';
import { until } from '../../helpers/eventually.js';
import { runCommand } from '../../helpers/process.js';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine } from '../../helpers/swarm-netns.js';
import { overlayNamespaces } from '../../helpers/swarm-overlay.js';

/**
 * Attachable overlay networks for plain containers (issue 14 §9 step 2), on two hosts (a manager
 * and a worker in network namespaces): `docker run --network <attachable overlay>` on the worker
 * (a one-shot run as well: plumbed before its process runs) reaches a service on the manager's
 * host by its name (VIP) and `tasks.<name>`; the service's task reaches the container by its
 * name, also after `docker restart`; GET /tasks shows the container's network-attachment task from API 1.38 and not below; a
 * non-attachable overlay is refused with dockerd's words; after `rm -f` the task, its address
 * claim, the worker's overlay namespace and the manager's FDB and neighbour entries are gone. The
 * worker's engine killed with SIGKILL: a running container is plugged again, one whose process
 * went meanwhile has its attachment released. `network connect`/`disconnect` of a running
 * container, docker-compose with the network as an external one (on the manager), and a worker
 * leaving with an attached container leave nothing either.
 */
describe('swarm: plain containers on attachable overlay networks', () => {
  let hosts: SwarmHosts;
  let m: NsEngine;
  let w: NsEngine;

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'worker'], { store: true });
    [m, w] = hosts.engines as [NsEngine, NsEngine];
  });
  after(async () => {
    for (const e of hosts?.engines ?? []) {
      const ids = (await e.docker(['ps', '-aq'])).stdout.split('\n').filter(Boolean);
      if (ids.length) await e.docker(['rm', '-f', ...ids]);
    }
    await hosts?.destroy();
  });

  async function api<T>(e: NsEngine, path: string): Promise<T> {
    const r = await runCommand('curl', ['-sf', '--unix-socket', e.socket, `http://x${path}`]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as T;
  }

  const http = (target: string) => [
    'sh',
    '-c',
    `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${target} 8080`,
  ];

  interface ApiTask {
    ID: string;
    NodeID: string;
    ServiceID: string;
    Spec: { NetworkAttachmentSpec?: { ContainerID: string }; Runtime?: string };
    Status: { State: string };
    NetworksAttachments?: Array<{ Network: { ID: string }; Addresses: string[] }>;
  }

  it('joins, resolves and answers both ways; refuses a non-attachable one; leaves nothing', async () => {
    await m.dockerOk(['network', 'create', '-d', 'overlay', '--attachable', 'att']);
    await m.dockerOk(['network', 'create', '-d', 'overlay', 'plain']);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'web',
      '--network',
      'att',
      '--constraint',
      'node.hostname==host1',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo web-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    const webTask = await until('the web task running on host 1', 30_000, async () => {
      const ids = await m.dockerOk(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=web']);
      return ids.split('\n').filter(Boolean)[0];
    });

    // refused on the worker: the network is not attachable (dockerd's words)
    const refused = await w.docker(['run', '--rm', '--network', 'plain', 'busybox:latest', 'true']);
    assert.notEqual(refused.code, 0);
    assert.match(
      refused.stderr,
      /Could not attach to network plain: rpc error: code = PermissionDenied desc = network plain not manually attachable/,
    );

    // a one-shot container on the worker reaches the service by its name (its VIP): the network
    // is plumbed before its process runs
    const once = await until('a one-shot docker run reaching web', 45_000, async () => {
      const r = await w.docker(['run', '--rm', '--network', 'att', 'busybox:latest', ...http('web')]);
      return r.code === 0 && r.stdout.includes('web-') ? r.stdout : undefined;
    });
    assert.match(once, /web-[0-9a-f]{12}/);

    const cid = await w.dockerOk([
      'run',
      '-d',
      '--name',
      'pal',
      '--network',
      'att',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo pal-here > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    for (const target of ['web', 'tasks.web']) {
      await until(`pal on the worker reaches ${target}`, 30_000, async () => {
        const r = await w.docker(['exec', 'pal', ...http(target)]);
        return r.code === 0 && r.stdout.includes('web-') ? true : undefined;
      });
    }
    // the service's task on the manager's host reaches the container by its name
    await until('the task reaches pal by name', 30_000, async () => {
      const r = await m.docker(['exec', webTask, ...http('pal')]);
      return r.code === 0 && r.stdout.includes('pal-here') ? true : undefined;
    });

    // a restart: the stop's release comes before the start's new attachment (one task, reachable)
    await w.dockerOk(['restart', '-t', '1', 'pal']);
    await until('the task reaches pal by name after its restart', 30_000, async () => {
      const r = await m.docker(['exec', webTask, ...http('pal')]);
      return r.code === 0 && r.stdout.includes('pal-here') ? true : undefined;
    });
    const afterRestart = await api<ApiTask[]>(m, '/v1.41/tasks');
    assert.equal(afterRestart.filter((t) => t.Spec.NetworkAttachmentSpec?.ContainerID === cid).length, 1);

    // its endpoint: an address of the network's block
    const [inspected] = JSON.parse(await w.dockerOk(['inspect', 'pal'])) as Array<{
      NetworkSettings: { Networks: Record<string, { IPAddress: string; NetworkID: string }> };
    }>;
    const ep = inspected?.NetworkSettings.Networks.att;
    assert.match(ep?.IPAddress ?? '', /^10\.0\.1\.\d+$/);
    // the worker shows the network while the container uses it
    const onWorker = await w.dockerOk(['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}']);
    assert.ok(onWorker.split('\n').includes('att'), onWorker);

    // GET /tasks: the attachment task from 1.38 on, not below
    const tasks = await api<ApiTask[]>(m, '/v1.41/tasks');
    const attachment = tasks.find((t) => t.Spec.NetworkAttachmentSpec?.ContainerID === cid);
    assert.ok(attachment, JSON.stringify(tasks));
    assert.equal(attachment.Spec.Runtime, 'attachment');
    assert.equal(attachment.NodeID, hosts.nodeId(2));
    assert.equal(attachment.ServiceID, '');
    assert.equal(attachment.Status.State, 'running');
    assert.equal(attachment.NetworksAttachments?.[0]?.Addresses[0]?.split('/')[0], ep?.IPAddress);
    assert.equal(attachment.NetworksAttachments?.[0]?.Network.ID, ep?.NetworkID);
    const old = await api<ApiTask[]>(m, '/v1.37/tasks');
    assert.ok(!old.some((t) => t.Spec.NetworkAttachmentSpec), 'no attachment task below 1.38');
    assert.ok(
      old.some((t) => t.ServiceID !== ''),
      'the service task is listed below 1.38',
    );

    // the manager's host has the container's FDB entry
    const mac = `02:42:${(ep?.IPAddress ?? '')
      .split('.')
      .map((n) => Number(n).toString(16).padStart(2, '0'))
      .join(':')}`;
    const [mNs] = await overlayNamespaces(m);
    assert.ok(mNs);
    // the static entries of the network's VXLAN device (the bridge's learnt ones age out alone)
    const vni = mNs?.split('-').pop() ?? '';
    const fdb = async () => {
      const r = await runCommand('ip', [
        'netns',
        'exec',
        mNs ?? '',
        'bridge',
        'fdb',
        'show',
        'dev',
        `vxlan${vni}`,
      ]);
      const neigh = await runCommand('ip', ['-n', mNs ?? '', 'neigh', 'show', 'dev', `vxlan${vni}`]);
      return [...r.stdout.split('\n').filter((l) => l.includes(' dst ')), neigh.stdout].join('\n');
    };
    assert.ok((await fdb()).includes(mac), await fdb());
    assert.ok((await fdb()).includes(`${ep?.IPAddress} `), await fdb());

    // gone: the task, its address claim, the worker's namespace, the manager's FDB entry
    await w.dockerOk(['rm', '-f', 'pal']);
    await until('the attachment task gone', 15_000, async () => {
      const now = await api<ApiTask[]>(m, '/v1.41/tasks');
      return now.some((t) => t.Spec.NetworkAttachmentSpec) ? undefined : true;
    });
    const store = hosts.store;
    assert.ok(store);
    const claims = await store.range(networkKeys.ipamOf(ep?.NetworkID ?? ''));
    assert.ok(!claims.kvs.some((kv) => kv.key.endsWith(`/${ep?.IPAddress}`)), 'the address is released');
    await until('the worker has no overlay namespace left', 15_000, async () =>
      (await overlayNamespaces(w)).length === 0 ? true : undefined,
    );
    await until("the manager's FDB and neighbour entries gone", 15_000, async () => {
      const now = await fdb();
      return now.includes(mac) || now.includes(`${ep?.IPAddress} `) ? undefined : true;
    });
    const after = await w.dockerOk(['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}']);
    assert.ok(!after.split('\n').includes('att'), after);

    // the worker's engine killed with SIGKILL while a container is on the network: the next
    // engine plugs it again (live restore); killed again and the container's process gone
    // meanwhile: the next engine releases its attachment task
    await w.dockerOk([
      'run',
      '-d',
      '--name',
      'pal2',
      '--network',
      'att',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo pal2-here > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    const reach = (what: string) =>
      until(what, 45_000, async () => {
        const r = await m.docker(['exec', webTask, ...http('pal2')]);
        return r.code === 0 && r.stdout.includes('pal2-here') ? true : undefined;
      });
    await reach('the task reaches pal2');
    await w.kill();
    await w.launch();
    await reach('the task reaches pal2 after the worker engine restarted');
    const pid = Number(await w.dockerOk(['inspect', '--format', '{{.State.Pid}}', 'pal2']));
    assert.ok(pid > 0);
    await w.kill();
    process.kill(pid, 'SIGKILL');
    await w.launch();
    await until("pal2's attachment task released", 30_000, async () => {
      const now = await api<ApiTask[]>(m, '/v1.41/tasks');
      return now.some((t) => t.Spec.NetworkAttachmentSpec) ? undefined : true;
    });
    await w.dockerOk(['rm', '-f', 'pal2']);
    await until('the worker has no overlay namespace left after the restarts', 15_000, async () =>
      (await overlayNamespaces(w)).length === 0 ? true : undefined,
    );
    const held = await store.range(networkKeys.ipamOf(ep?.NetworkID ?? ''));
    // the gateway, the service's VIP and its task: nothing of the containers
    assert.equal(held.kvs.length, 3, held.kvs.map((kv) => `${kv.key} ${kv.value}`).join('\n'));

    // `network connect` of a running container on a local network, then `disconnect`
    await w.dockerOk(['network', 'create', 'lnet']);
    await w.dockerOk([
      'run',
      '-d',
      '--name',
      'pal3',
      '--network',
      'lnet',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo pal3-here > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await w.dockerOk(['network', 'connect', 'att', 'pal3']);
    await until('the task reaches pal3 after network connect', 30_000, async () => {
      const r = await m.docker(['exec', webTask, ...http('pal3')]);
      return r.code === 0 && r.stdout.includes('pal3-here') ? true : undefined;
    });
    const ifaces = await w.dockerOk(['exec', 'pal3', 'ip', '-o', '-4', 'addr']);
    assert.match(ifaces, /eth1\s+inet 10\.0\.1\./, ifaces);
    await w.dockerOk(['network', 'disconnect', 'att', 'pal3']);
    await until('the attachment task gone after disconnect', 15_000, async () => {
      const now = await api<ApiTask[]>(m, '/v1.41/tasks');
      return now.some((t) => t.Spec.NetworkAttachmentSpec) ? undefined : true;
    });
    assert.doesNotMatch(await w.dockerOk(['exec', 'pal3', 'ip', '-o', '-4', 'addr']), /10\.0\.1\./);
    await w.dockerOk(['rm', '-f', 'pal3']);
    await w.dockerOk(['network', 'rm', 'lnet']);
    await until('no overlay namespace left after disconnect', 15_000, async () =>
      (await overlayNamespaces(w)).length === 0 ? true : undefined,
    );

    // docker-compose with the network as an external one, on the manager (a worker shows the
    // network only once something uses it, so compose's check of it fails there, as with dockerd)
    const project = await mkdtemp(join(tmpdir(), 'berth-attach-compose-'));
    try {
      await writeFile(
        join(project, 'docker-compose.yml'),
        [
          "version: '3.7'",
          'services:',
          '  palc:',
          '    image: busybox:latest',
          '    command: sh -c "mkdir -p /www && echo palc-here > /www/index.html && exec httpd -f -p 8080 -h /www"',
          'networks:',
          '  default:',
          '    external: true',
          '    name: att',
          '',
        ].join('\n'),
      );
      const compose = (args: string[]) =>
        runCommand('docker-compose', ['-p', 'attp', '-f', join(project, 'docker-compose.yml'), ...args], {
          env: { DOCKER_HOST: `unix://${m.socket}`, COMPOSE_INTERACTIVE_NO_CLI: '1' },
        });
      const up = await compose(['up', '-d']);
      assert.equal(up.code, 0, up.stdout + up.stderr);
      await until('the task reaches the compose service by its name', 30_000, async () => {
        const r = await m.docker(['exec', webTask, ...http('palc')]);
        return r.code === 0 && r.stdout.includes('palc-here') ? true : undefined;
      });
      const down = await compose(['down']);
      assert.equal(down.code, 0, down.stdout + down.stderr);
    } finally {
      await rm(project, { recursive: true, force: true });
    }
    await until('no attachment task left after compose down', 15_000, async () => {
      const now = await api<ApiTask[]>(m, '/v1.41/tasks');
      return now.some((t) => t.Spec.NetworkAttachmentSpec) ? undefined : true;
    });

    // the worker leaves the swarm with a container on the network: its attachment goes back
    await w.dockerOk(['run', '-d', '--name', 'pal4', '--network', 'att', 'busybox:latest', 'sleep', '300']);
    await w.dockerOk(['swarm', 'leave']);
    const atLeave = await api<ApiTask[]>(m, '/v1.41/tasks');
    assert.ok(!atLeave.some((t) => t.Spec.NetworkAttachmentSpec), 'released at leave');
    await w.dockerOk(['rm', '-f', 'pal4']);
    assert.deepEqual(await overlayNamespaces(w), []);

    const links = await hosts.net.exec(2, ['ip', '-j', '-d', 'link']);
    const left = (
      JSON.parse(links.stdout || '[]') as Array<{ ifname: string; linkinfo?: { info_kind?: string } }>
    ).filter(
      (l) => l.linkinfo?.info_kind === 'vxlan' || (l.linkinfo?.info_kind === 'veth' && l.ifname !== 'eth0'),
    );
    assert.deepEqual(
      left.map((l) => l.ifname),
      [],
    );
  });
});
