import type { RegistryClient } from './client.js';
import type { AuthConfig, Platform } from './types.js';

/** GET /distribution/{name}/json (moby's registry.DistributionInspect). */
export interface DistributionInspect {
  Descriptor: { mediaType: string; digest: string; size: number };
  Platforms: Platform[];
}

/** image-spec's Platform in its field order (architecture, os, os.version, os.features, variant). */
function platformOf(p: Partial<Platform> & Record<string, unknown>): Platform {
  const out: Record<string, unknown> = { architecture: p.architecture ?? '', os: p.os ?? '' };
  if (p['os.version']) out['os.version'] = p['os.version'];
  if (Array.isArray(p['os.features']) && p['os.features'].length) out['os.features'] = p['os.features'];
  if (p.variant) out.variant = p.variant;
  return out as unknown as Platform;
}

/**
 * The descriptor of what `name` (`host:port/repo[:tag|@digest]`, already normalised by the
 * caller into domain, path and reference) points to in its registry, and its platforms: an
 * index's entries, or the platform of an image's config (schema 1: its architecture on linux).
 */
export async function inspectDistribution(
  client: RegistryClient,
  target: { domain: string; path: string; familiar: string; reference: string },
  creds: AuthConfig,
  signal?: AbortSignal,
): Promise<DistributionInspect> {
  const endpoints = await client.endpoints(target.domain, target.familiar);
  const session = await client.open(endpoints, target.path, creds, ['pull'], signal);
  const m = await session.manifest(target.reference, signal);
  const Platforms: Platform[] = [];
  if (m.kind === 'index') {
    for (const d of m.index.manifests)
      if (d.platform) Platforms.push(platformOf(d.platform as Platform & Record<string, unknown>));
  } else if (m.kind === 'manifest') {
    try {
      const config = JSON.parse(
        (await session.blobBytes(m.manifest.config.digest, signal, 8 * 1024 * 1024)).toString('utf8'),
      );
      if (config && (config.os || config.architecture)) Platforms.push(platformOf(config));
    } catch (err) {
      if (signal?.aborted) throw err;
      // dockerd leaves the platforms out when the config cannot be read
    }
  } else {
    Platforms.push(platformOf({ architecture: m.schema1.architecture, os: 'linux' }));
  }
  return { Descriptor: { mediaType: m.mediaType, digest: m.digest, size: m.bytes.length }, Platforms };
}
