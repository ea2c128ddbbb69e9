import { runCommand } from '../test/helpers/process.js';
import { TestEngine } from '../test/helpers/engine.js';
import { buildOciLayout, startTestRegistry, tempDir } from '../test/helpers/registry.js';
const reg = await startTestRegistry();
const layout = await tempDir();
await buildOciLayout(layout, { refName: 'v1', platforms: [{ os: 'linux', architecture: 'amd64' }, { os: 'linux', architecture: 'arm64' }] });
const h = new URL(reg.url).host;
console.log(await runCommand('skopeo', ['copy', '--all', '--dest-tls-verify=false', `oci:${layout}:v1`, `docker://${h}/multi:v1`]));
const e = await TestEngine.start();
try {
  const r = await e.request('POST', `/v1.41/images/create?fromImage=${h}/multi&tag=v1`);
  console.log(r.status, r.text());
  console.log(await e.docker(['pull', `${h}/multi:v1`]));
  console.log(await e.docker(['pull', '--platform', 'linux/arm64', `${h}/multi:v1`]));
  console.log((await e.docker(['image', 'inspect', '--format', '{{.Architecture}} {{.RepoDigests}} {{.RepoTags}}', `${h}/multi:v1`])).stdout);
  console.log(await e.docker(['run', '--rm', `${h}/multi:v1`, 'cat', '/etc/marker']));
  console.log(await e.docker(['pull', `${h}/multi:nope`]));
  console.log(await e.docker(['pull', `${h}/nope`]));
  console.log(await e.docker(['images', '--digests']));
} finally { console.log(e.log().slice(-3000)); await e.destroy(); await reg.stop(); }
