import { invalidParameter } from '../../../common/errors.js';
import { parseGroup, parsePasswd, readInRoot } from '../../runtime/oci/user.js';

const MAX_ID = 2 ** 31 - 1;
/** How dockerd 20.10 starts a --chown it cannot resolve. */
const MAPPING = 'unable to convert uid/gid chown string to host mapping: ';

function numeric(text: string): number | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const n = Number(text);
  if (n > MAX_ID) throw invalidParameter(`uids and gids must be in range 0-${MAX_ID}`);
  return n;
}

/**
 * COPY/ADD `--chown=<user>[:<group>]` as dockerd's classic builder reads it: numbers are taken
 * as they are, names looked up in the image's /etc/passwd and /etc/group (their text given);
 * a user alone names the group too (`--chown=bin` is bin:bin). An unknown name is a 400 in
 * dockerd's words.
 */
export function resolveChown(spec: string, passwd: string, group: string): { uid: number; gid: number } {
  const parts = spec.split(':');
  if (parts.length > 2 || spec === '') throw invalidParameter(`invalid chown string format: ${spec}`);
  const user = parts[0] as string;
  const grp = parts.length === 2 ? (parts[1] as string) : user;
  let uid = numeric(user);
  if (uid === undefined) {
    uid = parsePasswd(passwd).find((u) => u.name === user)?.uid;
    if (uid === undefined) {
      throw invalidParameter(`${MAPPING}can't find uid for user ${user}: no such user: ${user}`);
    }
  }
  let gid = numeric(grp);
  if (gid === undefined) {
    gid = parseGroup(group).find((g) => g.name === grp)?.gid;
    if (gid === undefined) {
      throw invalidParameter(`${MAPPING}can't find gid for group ${grp}: no such group: ${grp}`);
    }
  }
  return { uid, gid };
}

/** resolveChown with a mounted filesystem's /etc/passwd and /etc/group (links read inside it). */
export async function resolveChownInRootfs(
  spec: string,
  rootfs: string,
): Promise<{ uid: number; gid: number }> {
  const numbersOnly = spec.split(':').every((p) => /^[0-9]+$/.test(p));
  if (numbersOnly) return resolveChown(spec, '', '');
  const [passwd, group] = await Promise.all([
    readInRoot(rootfs, '/etc/passwd'),
    readInRoot(rootfs, '/etc/group'),
  ]);
  return resolveChown(spec, passwd, group);
}
