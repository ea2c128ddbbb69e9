import { posix } from 'node:path';
import { Readable } from 'node:stream';
import tarStream from 'tar-stream';
import type { StorageOps } from './adapters/host.ops.js';
import { WHITEOUT_OPAQUE, WHITEOUT_PREFIX } from './layer.apply.js';

const OPAQUE_XATTR = 'SCHILY.xattr.trusted.overlay.opaque';

/** Keep the xattr records of a PAX header, minus overlay's own (`trusted.overlay.*`). */
function xattrRecords(pax: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!pax) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(pax)) {
    if (k.startsWith('SCHILY.xattr.') && !k.startsWith('SCHILY.xattr.trusted.overlay.')) out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

function memberName(name: string): string {
  return name.replace(/^\.\/?/, '').replace(/\/+$/, '');
}

/**
 * The changes of an overlay upper directory as a layer tarball in AUFS form, the way docker
 * diff/commit/export want it: overlay whiteouts (0/0 character devices) become `.wh.<name>`
 * files, opaque directories (`trusted.overlay.opaque=y`) get a `.wh..wh..opq` member, overlay's
 * own xattrs are dropped. GNU tar reads the directory (owners, modes, xattrs, hard links,
 * devices); the stream is rewritten member by member. Uncompressed.
 */
export function exportDiff(dir: string, ops: StorageOps): Readable {
  const tar = ops.createTar(dir);
  const extract = tarStream.extract();
  const pack = tarStream.pack();
  const fail = (err: Error) => {
    tar.kill();
    pack.destroy(err);
  };
  extract.on('entry', (h, stream, next) => {
    const name = memberName(h.name);
    const base = {
      uid: h.uid,
      gid: h.gid,
      uname: h.uname,
      gname: h.gname,
      mtime: h.mtime,
    };
    const done = (err?: Error | null) => (err ? fail(err) : next());
    if (name === '') {
      stream.on('end', () => next());
      stream.resume();
      return;
    }
    const pax = xattrRecords(h.pax as Record<string, string> | undefined);
    if (h.type === 'character-device' && h.devmajor === 0 && h.devminor === 0) {
      stream.resume();
      const dirName = posix.dirname(name) === '.' ? '' : `${posix.dirname(name)}/`;
      pack.entry(
        {
          ...base,
          name: `${dirName}${WHITEOUT_PREFIX}${posix.basename(name)}`,
          type: 'file',
          mode: 0o600,
          size: 0,
        },
        '',
        done,
      );
      return;
    }
    if (h.type === 'directory') {
      stream.resume();
      const opaque = (h.pax as Record<string, string> | undefined)?.[OPAQUE_XATTR] === 'y';
      pack.entry(
        { ...base, name: `${name}/`, type: 'directory', mode: h.mode, ...(pax ? { pax } : {}) },
        (err) => {
          if (err) return fail(err);
          if (!opaque) return next();
          pack.entry(
            {
              ...base,
              name: `${name}/${WHITEOUT_OPAQUE}`,
              type: 'file',
              mode: (h.mode ?? 0o755) & 0o777,
              size: 0,
            },
            '',
            done,
          );
        },
      );
      return;
    }
    const header = {
      ...base,
      name,
      type: h.type,
      mode: h.mode,
      size: h.type === 'file' || h.type === 'contiguous-file' ? h.size : 0,
      linkname: h.type === 'link' ? memberName(h.linkname ?? '') : (h.linkname ?? undefined),
      devmajor: h.devmajor,
      devminor: h.devminor,
      ...(pax ? { pax } : {}),
    };
    if (header.size) {
      const entry = pack.entry(header, done);
      stream.pipe(entry);
    } else {
      stream.resume();
      pack.entry(header, '', done);
    }
  });
  extract.on('finish', () => {
    tar.done.then(
      () => pack.finalize(),
      (err: Error) => fail(err),
    );
  });
  extract.on('error', (err: Error) => fail(err));
  tar.stdout.on('error', (err: Error) => fail(err));
  tar.stdout.pipe(extract as unknown as NodeJS.WritableStream);
  tar.done.catch((err: Error) => fail(err));
  return Readable.from(pack as AsyncIterable<Buffer>, { objectMode: false });
}
