import { errnoCode, invalidParameter } from '../../../common/errors.js';
import { readFile } from '../../../common/fs/quick.js';
import { resolveInRoot } from './rootfs-path.js';

export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export interface GroupEntry {
  name: string;
  gid: number;
  members: string[];
}

export interface ExecUser {
  uid: number;
  gid: number;
  /** gid first, then the user's supplementary groups, then GroupAdd (as dockerd). */
  additionalGids: number[];
  home: string;
}

const maxId = 2 ** 31 - 1;

/** Parse /etc/passwd text (as libcontainer/user: malformed lines are skipped). */
export function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const f = line.split(':');
    const uid = Number.parseInt(f[2] ?? '', 10);
    const gid = Number.parseInt(f[3] ?? '', 10);
    out.push({
      name: f[0] ?? '',
      uid: Number.isNaN(uid) ? 0 : uid,
      gid: Number.isNaN(gid) ? 0 : gid,
      home: f[5] ?? '',
    });
  }
  return out;
}

/** Parse /etc/group text. */
export function parseGroup(text: string): GroupEntry[] {
  const out: GroupEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const f = line.split(':');
    const gid = Number.parseInt(f[2] ?? '', 10);
    out.push({
      name: f[0] ?? '',
      gid: Number.isNaN(gid) ? 0 : gid,
      members: (f[3] ?? '').split(',').filter(Boolean),
    });
  }
  return out;
}

function numeric(s: string): number | null {
  if (!/^[0-9]+$/.test(s)) return null;
  return Number(s);
}

function checkRange(id: number): void {
  if (id < 0 || id > maxId) throw invalidParameter(`uids and gids must be in range 0-${maxId}`);
}

/**
 * Resolve `user` (`name|uid[:group|gid]`, empty: root) against passwd and group entries, as
 * runc's libcontainer/user.GetExecUser, then add GroupAdd as dockerd does.
 */
export function resolveUser(
  userSpec: string,
  passwd: PasswdEntry[],
  groups: GroupEntry[],
  groupAdd: string[] = [],
): ExecUser {
  const [userArg = '', groupArg = ''] = userSpec.split(':', 2) as [string?, string?];
  const user = { uid: 0, gid: 0, name: '', home: '/' };
  let sgids: number[] = [];

  const uidArg = numeric(userArg);
  const matches = passwd.filter((u) => (uidArg !== null ? u.uid === uidArg : u.name === userArg));
  if (userArg === '') {
    // no user given: root; supplementary groups of root's entry still apply
    const root = passwd.find((u) => u.uid === 0);
    if (root) Object.assign(user, { uid: 0, gid: root.gid, name: root.name, home: root.home });
  } else if (matches.length > 0) {
    const u = matches[0]!;
    Object.assign(user, { uid: u.uid, gid: u.gid, name: u.name, home: u.home });
  } else if (uidArg === null) {
    throw invalidParameter(`unable to find user ${userArg}: no matching entries in passwd file`);
  } else {
    checkRange(uidArg);
    user.uid = uidArg;
  }

  if (groupArg !== '' || user.name !== '') {
    const gidArg = numeric(groupArg);
    const found = groups.filter((g) =>
      groupArg === '' ? g.members.includes(user.name) : g.name === groupArg || String(g.gid) === groupArg,
    );
    if (groupArg !== '') {
      if (found.length > 0) user.gid = found[0]!.gid;
      else if (gidArg === null) {
        throw invalidParameter(`unable to find group ${groupArg}: no matching entries in group file`);
      } else {
        checkRange(gidArg);
        user.gid = gidArg;
      }
    } else {
      sgids = found.map((g) => g.gid);
    }
  }

  const added: number[] = [];
  for (const g of groupAdd) {
    const n = numeric(g);
    const entry = groups.find((e) => e.name === g || (n !== null && e.gid === n));
    if (entry) added.push(entry.gid);
    else if (n !== null) {
      checkRange(n);
      added.push(n);
    } else throw invalidParameter(`Unable to find group ${g}: no matching entries in group file`);
  }

  return { uid: user.uid, gid: user.gid, additionalGids: [user.gid, ...sgids, ...added], home: user.home };
}

/** A file of a mounted filesystem as text (links resolved inside it); missing is empty. */
export async function readInRoot(rootfs: string, path: string): Promise<string> {
  try {
    return await readFile(await resolveInRoot(rootfs, path), 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return '';
    throw err;
  }
}

/** resolveUser with the rootfs's /etc/passwd and /etc/group (missing files count as empty). */
export async function resolveUserInRootfs(
  rootfs: string,
  userSpec: string,
  groupAdd: string[] = [],
): Promise<ExecUser> {
  const [passwd, group] = await Promise.all([
    readInRoot(rootfs, '/etc/passwd'),
    readInRoot(rootfs, '/etc/group'),
  ]);
  return resolveUser(userSpec, parsePasswd(passwd), parseGroup(group), groupAdd);
}
