import { writeFile } from 'node:fs/promises';
import bcrypt from 'bcryptjs';
import { startTestRegistry } from '/work/wt/dist/test/helpers/registry.js';
await writeFile('/tmp/htp', `alice:${bcrypt.hashSync('alice-pw', 5)}\n`);
const basic = await startTestRegistry({ auth: { htpasswd: { realm: 'test', path: '/tmp/htp' } } });
for (const p of ['/v2/', '/v2/a/b/manifests/x']) { const r = await fetch(basic.url + p); console.log(p, r.status, r.headers.get('www-authenticate'), await r.text()); }
await basic.stop();
