import type { ContainerConfig, ImageConfigFile } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { parseNormalizedNamed, type Reference, withTag } from '../../common/reference.js';
import { rfc3339Nano } from '../../common/time.js';
import { applyChanges } from './changes.js';
import { hostArchitecture, orderedContainerConfig } from './config.js';
import type { ImageCreator } from './create.js';
import type { ImageEvents } from './image.events.js';
import type { ImageStore } from './image.store.js';
import type { ImportOptions } from './images.types.js';
import { addLayer } from './layers.js';
import { hasDigest } from './references.js';
import type { Tagger } from './tags.js';
import { openUrl } from './url-source.js';

/** docker import (`POST /images/create?fromSrc=`): one layer from a tarball or a URL, one image. */
export class ImageImporter {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'content' | 'overlay' | 'pin' | 'unpin'>;
      creator: Pick<ImageCreator, 'createImage'>;
      tags: Pick<Tagger, 'tagId'>;
      events: ImageEvents;
      /** Written as docker_version into new image configs. */
      engineVersion: string;
    },
  ) {}

  /** Returns the new image ID; events `tag` (when tagged) then `import`. */
  async importImage(o: ImportOptions): Promise<string> {
    let newRef: Reference | undefined;
    if (o.repo) {
      newRef = parseNormalizedNamed(o.repo);
      if (hasDigest(newRef)) throw invalidParameter('cannot import digest reference');
      if (o.tag) newRef = withTag(newRef, o.tag);
    }
    const platform = parsePlatform(o.platform);
    const config = applyChanges({}, o.changes ?? []);
    let body: AsyncIterable<Buffer>;
    let total = o.bodySize;
    let src = o.src;
    if (src === '-') {
      if (!o.body) throw invalidParameter('no request body to import');
      body = o.body;
    } else {
      if (!src.includes('://')) src = `http://${src}`;
      const opened = await openUrl(src);
      o.onProgress?.({ kind: 'status', status: `Downloading from ${opened.url}` });
      total = opened.length;
      body = opened.body;
    }
    const message = o.message || `Imported from ${src}`;

    let lastSent = 0;
    let lastTime = 0;
    const onProgress = (n: number) => {
      const now = Date.now();
      if (n - lastSent >= 512 * 1024 && now - lastTime >= 100) {
        lastSent = n;
        lastTime = now;
        o.onProgress?.({ kind: 'progress', status: 'Importing', current: n, total });
      }
    };
    const { layer, release } = await addLayer(this.deps.store, null, body, onProgress);
    try {
      if (lastSent > 0)
        o.onProgress?.({
          kind: 'progress',
          status: 'Importing',
          current: layer.blob?.size ?? lastSent,
          total,
        });
      const created = rfc3339Nano();
      const imageConfig: ImageConfigFile = {
        architecture: platform.architecture,
        comment: message,
        config: orderedContainerConfig(config) as ContainerConfig,
        container_config: orderedContainerConfig(undefined) as ContainerConfig,
        created,
        docker_version: this.deps.engineVersion,
        history: [{ created, comment: message }],
        os: platform.os,
        rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      };
      if (platform.variant) imageConfig.variant = platform.variant;
      const id = await this.deps.creator.createImage(imageConfig);
      if (newRef) await this.deps.tags.tagId(id, newRef);
      this.deps.events.publish('import', id, id);
      return id;
    } finally {
      release();
    }
  }
}

/** The operating systems and architectures Go knows (what containerd's platform parser accepts alone). */
const KNOWN_OSES = new Set(
  'aix android darwin dragonfly freebsd hurd illumos ios js linux nacl netbsd openbsd plan9 solaris windows zos'.split(
    ' ',
  ),
);
const KNOWN_ARCHES = new Set(
  '386 amd64 amd64p32 arm armbe arm64 arm64be loong64 mips mipsle mips64 mips64le mips64p32 mips64p32le ppc ppc64 ppc64le riscv riscv64 s390 s390x sparc sparc64 wasm'.split(
    ' ',
  ),
);

/** `os[/arch[/variant]]`, or an OS or architecture alone, defaulting to the host. */
export function parsePlatform(spec: string | undefined): {
  os: string;
  architecture: string;
  variant?: string;
} {
  const host = { os: 'linux', architecture: hostArchitecture() };
  if (!spec) return host;
  const parts = spec.toLowerCase().split('/');
  if (parts.length > 3 || parts.some((p) => !/^[a-z0-9_.-]+$/.test(p))) {
    throw invalidParameter(`"${spec}": unknown operating system or architecture: invalid argument`);
  }
  const archMap: Record<string, string> = { x86_64: 'amd64', x86: '386', aarch64: 'arm64', armhf: 'arm' };
  if (parts.length === 1) {
    // containerd's platforms.Parse: one word is an OS or an architecture (of this OS), else unknown
    const word = parts[0] as string;
    if (KNOWN_ARCHES.has(archMap[word] ?? word)) parts.unshift('linux');
    else if (!KNOWN_OSES.has(word)) {
      throw invalidParameter(`"${spec}": unknown operating system or architecture: invalid argument`);
    }
  }
  const [os, arch, variant] = parts as [string, string?, string?];
  if (os !== 'linux') throw invalidParameter('operating system is not supported');
  const out: { os: string; architecture: string; variant?: string } = {
    os,
    architecture: arch ? (archMap[arch] ?? arch) : host.architecture,
  };
  if (variant) out.variant = variant;
  return out;
}
