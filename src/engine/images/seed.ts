import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import tarStream from 'tar-stream';
import { isKind } from '../../common/errors.js';
import { DEFAULT_PATH_ENV, type ImageService } from './images.service.js';

const run = promisify(execFile);

/** Where Debian's busybox-static puts the binary. */
export const HOST_BUSYBOX = '/bin/busybox';

const PASSWD = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`;

const GROUP = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:9:
wheel:x:10:root
cdrom:x:11:
dialout:x:18:
floppy:x:19:
video:x:28:
audio:x:29:
tape:x:32:
www-data:x:33:
operator:x:37:
utmp:x:43:
plugdev:x:46:
staff:x:50:
lock:x:54:
netdev:x:82:
users:x:100:
nogroup:x:65534:
`;

const SHADOW = `root:*:10933:0:99999:7:::
daemon:*:10933:0:99999:7:::
bin:*:10933:0:99999:7:::
sys:*:10933:0:99999:7:::
sync:*:10933:0:99999:7:::
mail:*:10933:0:99999:7:::
www-data:*:10933:0:99999:7:::
operator:*:10933:0:99999:7:::
nobody:*:10933:0:99999:7:::
`;

/** A fixed mtime, so the same busybox binary always gives the same layer (diff ID). */
const MTIME = new Date(Date.UTC(2024, 0, 1));

interface Entry {
  name: string;
  type: 'directory' | 'file' | 'symlink';
  mode: number;
  content?: Buffer | string;
  linkname?: string;
}

/**
 * The rootfs of a busybox image as a tarball (uncompressed), from the host's static busybox:
 * /bin/busybox with one symlink per applet, /etc/passwd, group, shadow, the empty files docker
 * bind-mounts over (hostname, hosts, resolv.conf) and the usual directories.
 */
export async function buildBusyboxRootfs(busybox: string = HOST_BUSYBOX): Promise<Buffer> {
  const binary = await readFile(busybox);
  const { stdout } = await run(busybox, ['--list'], { maxBuffer: 1 << 20 });
  const applets = [...new Set(stdout.split('\n').map((s) => s.trim()))]
    .filter((s) => /^[A-Za-z0-9_.[\]-]+$/.test(s) && s !== 'busybox')
    .sort();
  if (!applets.includes('sh')) applets.push('sh');
  const dirs: Array<[string, number]> = [
    ['bin', 0o755],
    ['dev', 0o755],
    ['etc', 0o755],
    ['home', 0o755],
    ['proc', 0o755],
    ['root', 0o700],
    ['sys', 0o755],
    ['tmp', 0o1777],
    ['usr', 0o755],
    ['usr/sbin', 0o755],
    ['var', 0o755],
    ['var/spool', 0o755],
    ['var/spool/mail', 0o755],
    ['var/www', 0o755],
  ];
  const entries: Entry[] = [];
  for (const [name, mode] of dirs) entries.push({ name: `${name}/`, type: 'directory', mode });
  entries.push({ name: 'bin/busybox', type: 'file', mode: 0o755, content: binary });
  for (const a of applets)
    entries.push({ name: `bin/${a}`, type: 'symlink', mode: 0o777, linkname: 'busybox' });
  entries.push(
    { name: 'etc/passwd', type: 'file', mode: 0o644, content: PASSWD },
    { name: 'etc/group', type: 'file', mode: 0o644, content: GROUP },
    { name: 'etc/shadow', type: 'file', mode: 0o640, content: SHADOW },
    { name: 'etc/nsswitch.conf', type: 'file', mode: 0o644, content: 'hosts: files dns\nnetworks: files\n' },
    { name: 'etc/hostname', type: 'file', mode: 0o644, content: '' },
    { name: 'etc/hosts', type: 'file', mode: 0o644, content: '' },
    { name: 'etc/resolv.conf', type: 'file', mode: 0o644, content: '' },
  );

  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const c of pack) chunks.push(c as Buffer);
  })();
  for (const e of entries) {
    const header = {
      name: e.name,
      type: e.type,
      mode: e.mode,
      uid: 0,
      gid: 0,
      mtime: MTIME,
      linkname: e.linkname,
    };
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (e.type === 'file') pack.entry(header, e.content ?? '', cb);
      else pack.entry(header, cb);
    });
  }
  pack.finalize();
  await collected;
  return Buffer.concat(chunks);
}

/** Write the busybox rootfs tarball to a file (for tests that `docker import` it). */
export async function writeBusyboxTarball(path: string, busybox?: string): Promise<string> {
  await writeFile(path, await buildBusyboxRootfs(busybox));
  return path;
}

/**
 * Import the busybox rootfs as `busybox:latest` (or opts.ref) with Cmd ["sh"] and the default
 * PATH, unless that reference exists already. Returns the image ID.
 */
export async function seedBusybox(
  images: ImageService,
  opts: { ref?: string; busybox?: string } = {},
): Promise<string> {
  const ref = opts.ref ?? 'busybox:latest';
  try {
    return (await images.resolve(ref)).id;
  } catch (err) {
    if (!isKind(err, 'NotFound')) throw err;
  }
  const tar = await buildBusyboxRootfs(opts.busybox);
  return images.importImage({
    src: '-',
    body: (async function* () {
      yield tar;
    })(),
    bodySize: tar.length,
    repo: ref,
    changes: [`ENV ${DEFAULT_PATH_ENV}`, 'CMD ["sh"]'],
  });
}
