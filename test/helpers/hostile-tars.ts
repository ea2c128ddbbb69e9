import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { gnuLong, member, paxHeader, tarOf } from './tar-builder.js';

/**
 * Hostile archives for every path that extracts a tar (docker cp, docker import, layer
 * application): each tries to write outside the root it is extracted into, or to make the engine
 * fail badly. Every name the archives create or aim at carries `marker`, so that a test can look
 * for it on the host afterwards (`markedOnHost`).
 */
export function hostileTars(marker: string) {
  const M = marker;
  const up = '../'.repeat(12);
  return {
    /** `..` climbing out of the extraction point. */
    dotdot: tarOf([{ name: `${up}tmp/${M}-dotdot`, data: 'x' }]),
    /** `..` after a real component, still out. */
    dotdotMid: tarOf([{ name: `a/${up}tmp/${M}-dotdotmid`, data: 'x' }]),
    /** `..` that stays inside once cleaned. */
    dotdotInner: tarOf([{ name: `a/../${M}-inner`, data: 'x' }]),
    /** An absolute name: taken below the extraction point. */
    absolute: tarOf([{ name: `/tmp/${M}-abs`, data: 'x' }]),
    /** A PAX path record overriding an innocent header name. */
    paxPath: tarOf([paxHeader({ path: `${up}tmp/${M}-pax` }), { name: `${M}-innocent`, data: 'x' }]),
    /** A PAX path record that is absolute. */
    paxPathAbsolute: tarOf([paxHeader({ path: `/${M}-paxabs` }), { name: `${M}-innocent`, data: 'x' }]),
    /** A PAX linkpath record sending a hard link out. */
    paxLinkpath: tarOf([
      { name: `${M}-t`, data: 'x' },
      paxHeader({ linkpath: `${up}etc/passwd` }),
      { name: `${M}-paxhard`, type: 'link', linkname: `${M}-t` },
    ]),
    /** A PAX linkpath record making a symlink to `/`, then a file written through it. */
    paxSymlinkThenWrite: tarOf([
      paxHeader({ linkpath: '/' }),
      { name: `${M}-paxsym`, type: 'symlink', linkname: `${M}-t` },
      { name: `${M}-paxsym/tmp/${M}-paxsymfile`, data: 'x' },
    ]),
    /** A GNU long name (`L` record) climbing out. */
    gnuLongName: tarOf([
      gnuLong(`${'a/'.repeat(10)}${up}${up}tmp/${M}-gnulong`),
      { name: 'short', data: 'x' },
    ]),
    /** A GNU long link name (`K` record) sending a hard link out. */
    gnuLongLink: tarOf([
      { name: `${M}-t`, data: 'x' },
      gnuLong(`${up}etc/passwd`, true),
      { name: `${M}-gnuhard`, type: 'link', linkname: `${M}-t` },
    ]),
    /** A GNU long name that is fine (300 bytes in two components). */
    gnuLongNameOk: tarOf([
      gnuLong(`${M}-${'d'.repeat(150)}/${'f'.repeat(120)}`),
      { name: 'short', data: 'x' },
    ]),
    /** A symlink to `/`, then a file through it. */
    symlinkRootThenWrite: tarOf([
      { name: `${M}-sroot`, type: 'symlink', linkname: '/' },
      { name: `${M}-sroot/tmp/${M}-symroot`, data: 'x' },
    ]),
    /** A symlink climbing out with `..`, then a file through it. */
    symlinkUpThenWrite: tarOf([
      { name: `${M}-sup`, type: 'symlink', linkname: up.slice(0, -1) },
      { name: `${M}-sup/tmp/${M}-symup`, data: 'x' },
    ]),
    /** A symlink to a file outside, then a file of the same name (written through the link?). */
    symlinkThenOverwrite: tarOf([
      { name: `${M}-supf`, type: 'symlink', linkname: `${up}tmp/${M}-symupfile` },
      { name: `${M}-supf`, data: 'x' },
    ]),
    /** A symlink to `..`, then a directory of that name and a file in it. */
    symlinkThenDirectory: tarOf([
      { name: `${M}-updir`, type: 'symlink', linkname: '..' },
      { name: `${M}-updir/`, type: 'directory' },
      { name: `${M}-updir/${M}-symdir`, data: 'x' },
    ]),
    /** A hard link to an absolute path. */
    hardlinkAbsolute: tarOf([{ name: `${M}-habs`, type: 'link', linkname: '/etc/passwd' }]),
    /** A hard link climbing out with `..`. */
    hardlinkUp: tarOf([{ name: `${M}-hup`, type: 'link', linkname: `${up}etc/passwd` }]),
    /** A hard link through a symlink to `/`. */
    hardlinkViaSymlink: tarOf([
      { name: `${M}-hs`, type: 'symlink', linkname: '/' },
      { name: `${M}-hvs`, type: 'link', linkname: `${M}-hs/etc/passwd` },
    ]),
    /** Device nodes and a fifo. */
    devices: tarOf([
      { name: `${M}-null`, type: 'char', devmajor: 1, devminor: 3, mode: 0o666 },
      { name: `${M}-loop`, type: 'block', devmajor: 7, devminor: 0, mode: 0o660 },
      { name: `${M}-fifo`, type: 'fifo', mode: 0o644 },
    ]),
    /** An overlay whiteout (a 0/0 character device) as a member. */
    whiteoutDevice: tarOf([{ name: `${M}-wdev`, type: 'char', devmajor: 0, devminor: 0 }]),
    /** Set-uid, set-gid and sticky bits. */
    setuid: tarOf([
      { name: `${M}-suid`, data: '#!/bin/sh\n', mode: 0o4755 },
      { name: `${M}-sgid`, data: 'x', mode: 0o2755, uid: 1000, gid: 1000 },
      { name: `${M}-sticky/`, type: 'directory', mode: 0o1777 },
    ]),
    /** A whiteout below a symlink to `/etc`. */
    whiteoutBelowSymlink: tarOf([
      { name: `${M}-wl`, type: 'symlink', linkname: '/etc' },
      { name: `${M}-wl/.wh.passwd`, data: '' },
    ]),
    /** An opaque-directory marker below a symlink to `/etc`. */
    opaqueBelowSymlink: tarOf([
      { name: `${M}-ol`, type: 'symlink', linkname: '/etc' },
      { name: `${M}-ol/.wh..wh..opq`, data: '' },
    ]),
    /** A whiteout climbing out. */
    whiteoutUp: tarOf([{ name: `a/${up}tmp/.wh.${M}-whup`, data: '' }]),
    /** A 5 MiB PAX record. */
    hugePaxRecord: tarOf([
      paxHeader({ comment: 'A'.repeat(5 * 1024 * 1024) }),
      { name: `${M}-afterpax`, data: 'x' },
    ]),
    /** A 5 MiB GNU long name. */
    hugeGnuLongName: tarOf([gnuLong(`${M}-${'g'.repeat(5 * 1024 * 1024)}`), { name: 'short', data: 'x' }]),
    /** A PAX header declaring 8 GiB, then nothing. */
    hugePaxSize: Buffer.concat([
      member({ name: 'PaxHeaders/x', type: 'pax', size: 2 ** 33 }).subarray(0, 512),
      Buffer.alloc(4096),
    ]),
    /** A file declaring 8 GiB, then 4 KiB. */
    hugeFileSize: Buffer.concat([
      member({ name: `${M}-big`, size: 8 ** 11 - 1 }).subarray(0, 512),
      Buffer.alloc(4096),
    ]),
    /** A name component longer than any file system takes (PAX path). */
    longComponent: tarOf([paxHeader({ path: `${M}-${'n'.repeat(300)}` }), { name: 'short', data: 'x' }]),
    /** An archive cut in the middle of a member. */
    truncated: tarOf([{ name: `${M}-cut`, data: Buffer.alloc(3000, 1) }], false).subarray(0, 1500),
    /** A header whose checksum is wrong. */
    badChecksum: (() => {
      const t = tarOf([{ name: `${M}-sum`, data: 'x' }]);
      t[0] = 0x5a;
      return t;
    })(),
    /** Not a tar at all. */
    garbage: Buffer.from('garbage '.repeat(200)),
  };
}

export type HostileCase = keyof ReturnType<typeof hostileTars>;

/**
 * The entries of the host's `/`, `/tmp` and `/etc` (and `extra` directories) whose names carry
 * `marker`: what an archive that escaped its root would have left.
 */
export async function markedOnHost(marker: string, extra: string[] = []): Promise<string[]> {
  const found: string[] = [];
  for (const dir of ['/', '/tmp', '/etc', ...extra]) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (name.includes(marker)) found.push(`${dir}/${name}`);
    }
  }
  return found;
}

/**
 * The paths below `root` whose last component carries `marker`, found without following a
 * symbolic link (a hostile archive leaves links to `/` behind).
 */
export async function markedUnder(root: string, marker: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, e.name);
      if (e.name.includes(marker)) found.push(path);
      if (e.isDirectory()) await walk(path);
    }
  };
  await walk(root);
  return found;
}
