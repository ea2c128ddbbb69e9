import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { ReferenceDockerd } from '../test/helpers/reference-dockerd.js';
import { startReferenceRegistry } from '../test/helpers/registry-reference.js';
import { tempDir } from '../test/helpers/registry.js';
import { busyboxTarball, BUSYBOX_CHANGES } from '../test/helpers/busybox.js';

const reg = await startReferenceRegistry(await tempDir());
const d = await ReferenceDockerd.start();
const out: string[] = [];
try {
  const h = reg.hostPort;
  await d.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), `${h}/bb:v1`]);
  // a 2-layer image: build with a Dockerfile? use commit
  await d.dockerOk(['run', '--name', 'c1', `${h}/bb:v1`, 'sh', '-c', 'head -c 3000000 /dev/urandom > /big']);
  await d.dockerOk(['commit', 'c1', `${h}/bb:two`]);
  out.push(await d.dockerOk(['push', `${h}/bb:v1`]));
  out.push(await d.dockerOk(['push', `${h}/bb:two`]));
  await d.dockerOk(['rm', 'c1']);
  await d.dockerOk(['rmi', `${h}/bb:v1`, `${h}/bb:two`]);
  const curl = (args: string[]) => { try { return execFileSync('curl', ['-sS', '-i', '--unix-socket', d.socket, ...args]).toString(); } catch (e) { return String(e); } };
  out.push('=== pull two', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/bb&tag=two`]));
  out.push('=== pull v1 (base exists)', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/bb&tag=v1`]));
  out.push('=== pull two again', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/bb&tag=two`]));
  out.push('=== missing tag', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/bb&tag=nope`]));
  out.push('=== missing repo', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/nope&tag=latest`]));
  out.push('=== missing digest', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/bb&tag=sha256:${'0'.repeat(64)}`]));
  out.push('=== hub', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=busybox&tag=latest`]));
  out.push('=== unreachable', curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=127.0.0.1:1/x&tag=latest`]));
  out.push('=== inspect', (await d.docker(['image', 'inspect', `${h}/bb:two`])).stdout);
  out.push('=== cli pull', JSON.stringify(await d.docker(['pull', `${h}/bb:v1`])));
  out.push('=== cli pull all', JSON.stringify(await d.docker(['pull', '-a', `${h}/bb`])));
  out.push('=== cli missing', JSON.stringify(await d.docker(['pull', `${h}/nope`])));
} finally {
  writeFileSync('scratch/refpull.out', out.join('\n'));
  await d.stop();
  await reg.stop();
}
