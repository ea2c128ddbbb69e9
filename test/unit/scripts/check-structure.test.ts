import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';

const script = resolve(import.meta.dirname, '../../../scripts/check-structure.ts');

/** Run the structure check over a tree of files (path -> text); its exit code and output. */
async function check(files: Record<string, string>): Promise<{ code: number; out: string }> {
  const root = await mkdtemp(join(tmpdir(), 'berth-structure-'));
  dirs.push(root);
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, root], { encoding: 'utf8' });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('scripts/check-structure.ts', () => {
  it('passes a tree without circles or forbidden imports', async () => {
    const r = await check({
      'src/common/a.ts': 'export const a = 1;\n',
      'src/engine/api/routes.ts': "import { b } from '../containers/b.js';\nexport const r = b;\n",
      'src/engine/containers/b.ts': "import { a } from '../../common/a.js';\nexport const b = a;\n",
    });
    assert.equal(r.code, 0, r.out);
  });

  it('finds a circle of type-only imports', async () => {
    const r = await check({
      'src/engine/x/one.ts': "import type { Two } from './two.js';\nexport type One = Two[];\n",
      'src/engine/x/two.ts': "import type { One } from './one.js';\nexport type Two = { one?: One };\n",
    });
    assert.equal(r.code, 1);
    assert.match(r.out, /import circle of 2 files/);
    assert.match(r.out, /src\/engine\/x\/one\.ts -> src\/engine\/x\/two\.ts/);
  });

  it('refuses a backend importing the wire or the HTTP kit, but not the composition root', async () => {
    const r = await check({
      'src/http/server.ts': 'export const s = 1;\n',
      'src/engine/api/versions.ts': 'export const v = 1;\n',
      'src/engine/containers/c.ts': "import { v } from '../api/versions.js';\nexport const c = v;\n",
      'src/engine/images/i.ts': "export { s } from '../../http/server.js';\n",
      'src/engine/daemon.ts':
        "import { v } from './api/versions.js';\nimport { s } from '../http/server.js';\nexport const d = v + s;\n",
    });
    assert.equal(r.code, 1);
    assert.match(
      r.out,
      /src\/engine\/containers\/c\.ts imports src\/engine\/api\/versions\.ts: backends never import the wire/,
    );
    assert.match(r.out, /src\/engine\/images\/i\.ts imports src\/http\/server\.ts: backends speak no HTTP/);
    assert.doesNotMatch(r.out, /daemon\.ts imports/);
  });

  it('ignores imports in comments', async () => {
    const r = await check({
      'src/engine/api/versions.ts': 'export const v = 1;\n',
      'src/engine/volumes/v.ts':
        "// import { v } from '../api/versions.js';\n/* import '../api/versions.js'; */\nexport const x = 1;\n",
    });
    assert.equal(r.code, 0, r.out);
  });
});
