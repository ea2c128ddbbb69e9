import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { PathNotFoundError } from '../../../src/registry/storage/driver.js';
import { FilesystemDriver } from '../../../src/registry/storage/filesystem.driver.js';
import { tempDir } from '../../helpers/registry.js';

let root: string;
let d: FilesystemDriver;
before(async () => {
  root = await tempDir('berth-fsd-');
  d = new FilesystemDriver(root);
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

async function readAll(s: NodeJS.ReadableStream): Promise<string> {
  let out = '';
  for await (const c of s) out += c.toString();
  return out;
}

describe('filesystem driver', () => {
  it('putContent/getContent/stat', async () => {
    await d.putContent('/a/b/c', 'hello');
    assert.equal((await d.getContent('/a/b/c')).toString(), 'hello');
    const st = await d.stat('/a/b/c');
    assert.equal(st.size, 5);
    assert.equal(st.isDir, false);
    assert.equal((await d.stat('/a/b')).isDir, true);
    await assert.rejects(d.getContent('/nope'), PathNotFoundError);
    await assert.rejects(d.stat('/a/b/c/d'), PathNotFoundError);
  });
  it('reader with offset and end', async () => {
    await d.putContent('/r', '0123456789');
    assert.equal(await readAll(await d.reader('/r')), '0123456789');
    assert.equal(await readAll(await d.reader('/r', 3)), '3456789');
    assert.equal(await readAll(await d.reader('/r', 3, 5)), '345');
    await assert.rejects(d.reader('/missing'), PathNotFoundError);
  });
  it('writer appends, commit and cancel', async () => {
    const w = await d.writer('/w/data', false);
    await w.write(Buffer.from('abc'));
    await w.close();
    const w2 = await d.writer('/w/data', true);
    assert.equal(w2.size, 3);
    await w2.write(Buffer.alloc(2 * 1024 * 1024, 1));
    await w2.commit();
    assert.equal((await d.stat('/w/data')).size, 3 + 2 * 1024 * 1024);
    const w3 = await d.writer('/w/gone', false);
    await w3.write(Buffer.from('x'));
    await w3.cancel();
    await assert.rejects(d.stat('/w/gone'), PathNotFoundError);
  });
  it('list, move, delete, walk', async () => {
    await d.putContent('/t/x/1', '1');
    await d.putContent('/t/y/2', '2');
    assert.deepEqual((await d.list('/t')).sort(), ['/t/x', '/t/y']);
    await d.move('/t/x/1', '/t/z/1');
    assert.equal((await d.getContent('/t/z/1')).toString(), '1');
    const seen: string[] = [];
    await d.walk('/t', (i) => {
      seen.push(i.path);
      return i.path === '/t/y' ? 'skip' : undefined;
    });
    assert.deepEqual(seen, ['/t/x', '/t/y', '/t/z', '/t/z/1']);
    await d.delete('/t');
    await assert.rejects(d.list('/t'), PathNotFoundError);
    await assert.rejects(d.delete('/t'), PathNotFoundError);
  });
  it('refuses paths that escape the root', async () => {
    await assert.rejects(d.getContent('/../etc/passwd'));
    await assert.rejects(d.getContent('relative'));
  });
});
