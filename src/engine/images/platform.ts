import type { ImageConfigFile } from '../../common/docker-types.js';
import { notFound } from '../../common/errors.js';
import { familiarString, referenceString, tryParseNormalizedNamed } from '../../common/reference.js';

/** An OCI platform (image-spec's Platform), as the image endpoints' `platform` parameters give it. */
export interface OciPlatform {
  os: string;
  architecture: string;
  variant?: string;
  'os.version'?: string;
  'os.features'?: string[];
}

/** containerd's platforms.Normalize: OS and architecture names and default variants in one form. */
export function normalizePlatform(p: OciPlatform): OciPlatform {
  const os = (p.os || 'linux').toLowerCase();
  let arch = p.architecture.toLowerCase();
  let variant = (p.variant ?? '').toLowerCase();
  switch (arch) {
    case 'i386':
      arch = '386';
      variant = '';
      break;
    case 'x86_64':
    case 'x86-64':
    case 'amd64':
      arch = 'amd64';
      if (variant === 'v1') variant = '';
      break;
    case 'aarch64':
    case 'arm64':
      arch = 'arm64';
      if (['8', 'v8', 'v8.0'].includes(variant)) variant = '';
      else if (['9', '9.0', 'v9.0'].includes(variant)) variant = 'v9';
      break;
    case 'armhf':
      arch = 'arm';
      variant = 'v7';
      break;
    case 'armel':
      arch = 'arm';
      variant = 'v6';
      break;
    case 'arm':
      if (variant === '' || variant === '7') variant = 'v7';
      else if (['5', '6', '8'].includes(variant)) variant = `v${variant}`;
      break;
  }
  const out: OciPlatform = { os: os === 'macos' ? 'darwin' : os, architecture: arch };
  if (variant) out.variant = variant;
  if (p['os.version']) out['os.version'] = p['os.version'];
  if (p['os.features']?.length) out['os.features'] = [...new Set(p['os.features'])].sort();
  return out;
}

/** containerd's platformVector: the platform and those it can also run (older variants, 386 on amd64). */
function platformVector(p: OciPlatform): OciPlatform[] {
  const base = { os: p.os, 'os.version': p['os.version'], 'os.features': p['os.features'] };
  const variantNumber = Number.parseInt((p.variant ?? '').replace(/^v/, ''), 10);
  const out: OciPlatform[] = [p];
  switch (p.architecture) {
    case 'amd64':
      for (let v = variantNumber - 1; Number.isInteger(v) && v >= 1; v--) {
        out.push({ ...base, architecture: 'amd64', variant: `v${v}` });
      }
      out.push({ ...base, architecture: '386' });
      break;
    case 'arm':
      for (let v = variantNumber - 1; Number.isInteger(v) && v >= 5; v--) {
        out.push({ ...base, architecture: 'arm', variant: `v${v}` });
      }
      break;
    case 'arm64': {
      // arm64/v8.x (and v9.x) run v8.0..v8.x; every arm64 runs arm/v8 and below
      const variant = p.variant || 'v8';
      const m = /^v(8|9)(?:\.(\d))?$/.exec(variant);
      const major = Number(m?.[1]);
      const minor = Number(m?.[2] ?? 0);
      if (!m || (major === 9 && minor > 7)) return [];
      const vector: OciPlatform[] = [];
      const ranges =
        major === 9 ? [[9, minor] as const, [8, Math.min(minor + 5, 9)] as const] : [[8, minor] as const];
      for (const [maj, top] of ranges) {
        for (let n = top; n >= 0; n--) {
          vector.push({ ...base, architecture: 'arm64', variant: n === 0 ? `v${maj}` : `v${maj}.${n}` });
        }
      }
      vector.push(...platformVector({ ...base, architecture: 'arm', variant: 'v8' }));
      return vector;
    }
  }
  return out;
}

/** containerd's matcher: same OS, architecture and variant; the features a subset of the wanted ones. */
function sameTarget(want: OciPlatform, other: OciPlatform): boolean {
  const o = normalizePlatform(other);
  if (want.os !== o.os || want.architecture !== o.architecture || (want.variant ?? '') !== (o.variant ?? ''))
    return false;
  const have = o['os.features'] ?? [];
  const wanted = new Set(want['os.features'] ?? []);
  return have.every((f) => wanted.has(f));
}

/**
 * moby's OnlyPlatformWithFallback(want).Match(image): the image's platform is `want` or one `want`
 * runs (containerd's platforms.Only), or, when the image names no variant, its OS and
 * architecture are `want`'s. (Windows OS versions are not compared: berth runs Linux images.)
 */
export function platformMatches(want: OciPlatform, image: OciPlatform): boolean {
  const w = normalizePlatform(want);
  if (platformVector(w).some((p) => sameTarget(normalizePlatform(p), image))) return true;
  if (image.variant) return false;
  const i = normalizePlatform(image);
  return w.os === i.os && w.architecture === i.architecture;
}

/**
 * How well `image` suits `want` (containerd's Only(want).Less ordering): 0 for the platform
 * itself, higher for the older ones `want` also runs, undefined when it does not match.
 */
export function platformRank(want: OciPlatform, image: OciPlatform): number | undefined {
  const w = normalizePlatform(want);
  const vector = platformVector(w);
  const i = vector.findIndex((p) => sameTarget(normalizePlatform(p), image));
  if (i >= 0) return i;
  return platformMatches(want, image) ? vector.length : undefined;
}

/** containerd's platforms.FormatAll: `os[(os.version+features)]/arch[/variant]`. */
export function formatPlatform(p: OciPlatform): string {
  if (!p.os) return 'unknown';
  let os = p.os;
  const features = p['os.features']?.join('+') ?? '';
  const version = p['os.version'] ?? '';
  if (version || features) os += `(${version}${features ? `+${features}` : ''})`;
  return [os, p.architecture, p.variant].filter(Boolean).join('/');
}

/** The platform an image's config says it is for. */
export function imagePlatform(config: ImageConfigFile): OciPlatform {
  const p: OciPlatform = { os: config.os ?? '', architecture: config.architecture ?? '' };
  if (config.variant) p.variant = config.variant;
  if (config['os.version']) p['os.version'] = config['os.version'];
  const features = (config as { 'os.features'?: unknown })['os.features'];
  if (Array.isArray(features) && features.length) p['os.features'] = features.map(String);
  return p;
}

/**
 * moby's GetImage with a platform: NotFound unless the image found under `name` is for `want`
 * (berth keeps no manifest lists that could say otherwise). `name` is shown familiar when it is
 * given in full (`docker.io/library/busybox:latest`), as given otherwise.
 */
export function checkImagePlatform(
  name: string,
  config: ImageConfigFile,
  want: OciPlatform | undefined,
): void {
  if (!want) return;
  const have = imagePlatform(config);
  if (platformMatches(want, have)) return;
  const ref = tryParseNormalizedNamed(name);
  const shown = ref && referenceString(ref) === name ? familiarString(ref) : name;
  throw notFound(
    `image with reference ${shown} was found but its platform (${formatPlatform(have)}) does not match the specified platform (${formatPlatform(want)})`,
  );
}
