import { execFileSync } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { ReferenceDockerd } from '../test/helpers/reference-dockerd.js';
import { startRegistry } from '../src/registry/index.js';
import { buildOciLayout } from '../test/helpers/registry.js';
import { runCommand } from '../test/helpers/process.js';
const work = mkdtempSync(join(tmpdir(), 'refauth-'));
const users = join(work, 'htpasswd');
execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw']);
const mk = (extra: Record<string, unknown>, n: string) => startRegistry({ version: '0.1', log: { level: 'error', accesslog: { disabled: true } }, storage: { filesystem: { rootdirectory: join(work, n) } }, http: { addr: '127.0.0.1:0' }, ...extra });
const basic = await mk({ auth: { htpasswd: { realm: 'test', path: users } } }, 'b');
const token = await mk({ berth: { tokenserver: { enabled: true, htpasswd: users } } }, 't');
await buildOciLayout(join(work, 'l'), { refName: 'v1' });
for (const r of [basic, token]) console.log(await runCommand('skopeo', ['copy', '--dest-tls-verify=false', '--dest-creds', 'alice:alice-pw', `oci:${join(work, 'l')}:v1`, `docker://${new URL(r.url).host}/team/app:v1`]));
const d = await ReferenceDockerd.start();
const out: string[] = [];
const curl = async (args: string[]) => (await runCommand('curl', ['-sS', '-i', '--unix-socket', d.socket, ...args])).stdout;
const hdr = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
try {
  for (const r of [basic, token]) {
    const h = new URL(r.url).host;
    out.push(`=== ${h} anon`, await curl(['-X', 'POST', `http://x/v1.41/images/create?fromImage=${h}/team/app&tag=v1`]));
    out.push(`=== ${h} wrong`, await curl(['-X', 'POST', '-H', `X-Registry-Auth: ${hdr({ username: 'alice', password: 'no' })}`, `http://x/v1.41/images/create?fromImage=${h}/team/app&tag=v1`]));
    out.push(`=== ${h} missing repo with creds`, await curl(['-X', 'POST', '-H', `X-Registry-Auth: ${hdr({ username: 'alice', password: 'alice-pw' })}`, `http://x/v1.41/images/create?fromImage=${h}/team/nope&tag=v1`]));
  }
} finally {
  writeFileSync('scratch/refauth.out', out.join('\n'));
  await d.stop(); await basic.close(); await token.close();
}
