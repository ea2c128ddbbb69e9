import { sha256 } from './registry.js';
import { type RawMember, tarOf } from './tar-builder.js';

export { sha256 };

/** A small layer tarball: the files given, each 0644 (directories for names ending in `/`). */
export function layerTar(files: Record<string, string>): Buffer {
  return tarOf(
    Object.entries(files).map(([name, data]) =>
      name.endsWith('/') ? { name, type: 'directory', mode: 0o755 } : { name, data, mode: 0o644 },
    ),
  );
}

/** An image config over `layers` (diff IDs from the uncompressed tarballs), as Linux images have them. */
export function imageConfig(layers: Buffer[], over: Record<string, unknown> = {}): Buffer {
  return Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      config: { Cmd: ['sh'], Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'] },
      created: '2024-01-02T03:04:05Z',
      history: layers.map(() => ({ created: '2024-01-02T03:04:05Z', created_by: 'test' })),
      os: 'linux',
      rootfs: { type: 'layers', diff_ids: layers.map(sha256) },
      ...over,
    }),
  );
}

export interface ArchiveImage {
  /** Uncompressed layer tarballs, bottom first (stored as given in `layerBlobs` when set). */
  layers: Buffer[];
  /** The bytes stored for each layer (compressed, or hostile) instead of `layers`. */
  layerBlobs?: Buffer[];
  config?: Buffer;
  tags?: string[];
}

/**
 * A docker save archive in dockerd 25's form (manifest.json naming blobs/sha256/...): each image's
 * config and layers under blobs/sha256, `extra` members appended (a test's hostile ones).
 */
export function dockerArchive(images: ArchiveImage[], extra: RawMember[] = []): Buffer {
  const members: RawMember[] = [
    { name: 'blobs/', type: 'directory' },
    { name: 'blobs/sha256/', type: 'directory' },
  ];
  const seen = new Set<string>();
  const manifest = images.map((img) => {
    const config = img.config ?? imageConfig(img.layers);
    const blobs = img.layerBlobs ?? img.layers;
    const layerNames = blobs.map((b) => `blobs/sha256/${sha256(b).slice(7)}`);
    for (const [i, b] of blobs.entries()) {
      const name = layerNames[i] as string;
      if (!seen.has(name)) members.push({ name, data: b });
      seen.add(name);
    }
    const configName = `blobs/sha256/${sha256(config).slice(7)}`;
    if (!seen.has(configName)) members.push({ name: configName, data: config });
    seen.add(configName);
    return { Config: configName, RepoTags: img.tags ?? null, Layers: layerNames };
  });
  members.push({ name: 'manifest.json', data: JSON.stringify(manifest) }, ...extra);
  return tarOf(members);
}
