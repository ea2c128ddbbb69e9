import tarStream from 'tar-stream';

export interface TarEntry {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'block-device' | 'fifo';
  content?: string | Buffer;
  mode?: number;
  uid?: number;
  gid?: number;
  mtime?: Date;
  linkname?: string;
  devmajor?: number;
  devminor?: number;
  pax?: Record<string, string>;
}

/** Build an uncompressed tarball in memory. */
export async function makeTar(entries: TarEntry[]): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const c of pack) chunks.push(c as Buffer);
  })();
  for (const e of entries) {
    const type = e.type ?? 'file';
    const header = {
      name: e.name,
      type,
      mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644),
      uid: e.uid ?? 0,
      gid: e.gid ?? 0,
      mtime: e.mtime ?? new Date(1_600_000_000_000),
      linkname: e.linkname,
      devmajor: e.devmajor,
      devminor: e.devminor,
      ...(e.pax ? { pax: e.pax } : {}),
    };
    await new Promise<void>((resolve, reject) => {
      if (type === 'file') pack.entry(header, e.content ?? '', (err) => (err ? reject(err) : resolve()));
      else pack.entry(header, (err) => (err ? reject(err) : resolve()));
    });
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}
