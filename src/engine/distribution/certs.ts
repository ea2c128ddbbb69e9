import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, invalidParameter } from '../../common/errors.js';

/** Where dockerd (and berth) look for per-registry certificates, in order. */
export const DEFAULT_CERTS_DIRS = ['/etc/docker/certs.d', '/etc/berth/certs.d'];

/** The TLS material of one registry: extra CAs, a client certificate and its key. */
export interface RegistryTls {
  ca: Buffer[];
  cert?: Buffer;
  key?: Buffer;
  /** Whether any certs.d folder existed for the registry. */
  found: boolean;
}

/**
 * Read `<dir>/<host:port>/` as dockerd's registry.ReadCertsDirectory does: every `*.crt` is a CA,
 * every `*.cert` a client certificate whose key is the `*.key` of the same name (a cert without
 * its key, or a key without its cert, is an error). Folders of every dir in `dirs` add up.
 */
export async function readCertsDirs(dirs: string[], hostPort: string): Promise<RegistryTls> {
  const out: RegistryTls = { ca: [], found: false };
  // a folder name cannot hold a colon-less IPv6 form safely; dockerd uses host:port as given
  if (hostPort.includes('/') || hostPort.startsWith('.')) return out;
  for (const base of dirs) {
    const dir = join(base, hostPort);
    let names: string[];
    try {
      names = (await readdir(dir)).sort();
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') continue;
      throw err;
    }
    out.found = true;
    for (const name of names) {
      if (name.endsWith('.crt')) {
        out.ca.push(await readFile(join(dir, name)));
      } else if (name.endsWith('.cert')) {
        const keyName = `${name.slice(0, -5)}.key`;
        if (!names.includes(keyName))
          throw invalidParameter(
            `missing key ${keyName} for client certificate ${name}. CA certificates must use the extension .crt`,
          );
        out.cert = await readFile(join(dir, name));
        out.key = await readFile(join(dir, keyName));
      } else if (name.endsWith('.key')) {
        const certName = `${name.slice(0, -4)}.cert`;
        if (!names.includes(certName))
          throw invalidParameter(`missing client certificate ${certName} for key ${name}`);
      }
    }
  }
  return out;
}
