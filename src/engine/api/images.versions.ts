import type { ContainerConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { orderedContainerConfig, unixSeconds, ZERO_TIME } from '../images/config.js';
import type { ImageDetails, ImageHistoryItem, ImageListItem, OciPlatform } from '../images/images.types.js';
import { decodeStruct, type Fields, str, strings } from './schema/go-json.js';
import { gates, versionAtLeast, versionBefore } from './versions.js';

/**
 * What the image endpoints change by API version: list rows, inspect and history as the request's
 * version shows them (the service's answers are version-free), and the JSON OCI platforms of the
 * 1.48+ parameters. Pure.
 */

/**
 * RepoTags/RepoDigests of a list row: below 1.43 an untagged image shows the fake `<none>:<none>`
 * and `<none>@<none>`, and an empty list is nil (JSON null), as dockerd 20.10; from 1.43 [].
 */
function listNames(
  item: ImageListItem,
  version: string,
): { tags: string[] | null; digests: string[] | null } {
  if (versionAtLeast(version, gates.imageListNoneTags))
    return { tags: item.repoTags, digests: item.repoDigests };
  if (item.repoTags.length === 0 && item.repoDigests.length === 0)
    return { tags: ['<none>:<none>'], digests: ['<none>@<none>'] };
  const orNull = (l: string[]) => (l.length ? l : null);
  return { tags: orNull(item.repoTags), digests: orNull(item.repoDigests) };
}

/**
 * GET /images/json row (and /system/df's), keys in dockerd's order. `Containers` is the count when
 * the service counted (the list from 1.51, /system/df always), -1 otherwise.
 */
export function shapeImageSummary(item: ImageListItem, version: string): Record<string, unknown> {
  const r = item.record;
  const names = listNames(item, version);
  const out: Record<string, unknown> = {
    Containers: item.containers ?? -1,
    Created: unixSeconds(r.created),
    Id: r.id,
    Labels: r.config.config?.Labels ?? null,
    ParentId: r.parent,
    RepoDigests: names.digests,
    RepoTags: names.tags,
    SharedSize: item.sharedSize ?? -1,
    Size: r.size,
  };
  if (versionBefore(version, gates.imageVirtualSizeOmitted)) out.VirtualSize = r.size;
  return out;
}

/** Config keys moby's image config (an OCI one) does not have: left out from 1.50. */
const CONTAINER_ONLY_CONFIG = [
  'Hostname',
  'Domainname',
  'AttachStdin',
  'AttachStdout',
  'AttachStderr',
  'Tty',
  'OpenStdin',
  'StdinOnce',
  'Image',
  'NetworkDisabled',
  'MacAddress',
  'StopTimeout',
];

/** Config keys written even when empty at 1.50 and 1.51, left out when empty from 1.52. */
const OMIT_EMPTY_CONFIG = ['Cmd', 'Entrypoint', 'Env', 'Labels', 'OnBuild', 'Volumes', 'User', 'WorkingDir'];

function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && Object.keys(v).length === 0;
}

/**
 * Image inspect's Config: dockerd 20.10's container.Config below 1.50 (null for an image without
 * one); from 1.50 the image config's own keys only (the legacy container keys left out, every
 * image has a Config object); from 1.52 Cmd, Entrypoint, Env, Labels, OnBuild, Volumes, User and
 * WorkingDir only when set (moby's inspect_response.go).
 */
export function shapeImageConfig(
  config: ContainerConfig | null | undefined,
  version: string,
): Record<string, unknown> | null {
  if (versionBefore(version, gates.imageConfigTrimmed)) return config ? orderedContainerConfig(config) : null;
  const out = orderedContainerConfig(config ?? {});
  for (const key of CONTAINER_ONLY_CONFIG) delete out[key];
  if (versionAtLeast(version, gates.imageInspectOmitEmpty)) {
    for (const key of OMIT_EMPTY_CONFIG) if (isEmpty(out[key])) delete out[key];
  }
  return out;
}

/**
 * GET /images/{name}/json, field for field as dockerd 20.10 answers, then by version: VirtualSize
 * until 1.43, Created left out when unset from 1.44, Container/ContainerConfig until 1.44, Config
 * as shapeImageConfig, and from 1.52 Parent, Comment, DockerVersion and Author only when set.
 * Descriptor (1.48), Manifests (1.48) and Identity (1.53) never appear: they come from the
 * containerd image store and trusted signatures, which berth has not.
 */
export function shapeImageInspect(d: ImageDetails, version: string): Record<string, unknown> {
  const r = d.record;
  const c = r.config;
  const omitEmpty = versionAtLeast(version, gates.imageInspectOmitEmpty);
  const out: Record<string, unknown> = {
    Id: r.id,
    RepoTags: r.repoTags,
    RepoDigests: r.repoDigests,
  };
  if (!omitEmpty || r.parent) out.Parent = r.parent;
  // dockerd: the config's comment, else the last history entry's (what commit writes)
  const comment = c.comment || (c.history?.at(-1)?.comment ?? '');
  if (!omitEmpty || comment) out.Comment = comment;
  if (c.created) out.Created = c.created;
  else if (versionBefore(version, gates.imageCreatedOmitEmpty)) out.Created = ZERO_TIME;
  if (versionBefore(version, gates.imageContainerConfig)) {
    out.Container = c.container ?? '';
    out.ContainerConfig = orderedContainerConfig(c.container_config);
  }
  if (!omitEmpty || c.docker_version) out.DockerVersion = c.docker_version ?? '';
  if (!omitEmpty || c.author) out.Author = c.author ?? '';
  out.Config = shapeImageConfig(c.config, version);
  out.Architecture = c.architecture ?? '';
  if (c.variant) out.Variant = c.variant;
  out.Os = c.os ?? '';
  if (c['os.version'] && !versionBefore(version, gates.imageOsVersion)) out.OsVersion = c['os.version'];
  out.Size = r.size;
  if (versionBefore(version, gates.imageVirtualSizeOmitted)) out.VirtualSize = r.size;
  out.GraphDriver = { Data: d.graphDriver ? { ...d.graphDriver } : null, Name: 'overlay2' };
  const rootfs: Record<string, unknown> = { Type: c.rootfs?.type ?? 'layers' };
  if (c.rootfs?.diff_ids?.length) rootfs.Layers = c.rootfs.diff_ids;
  out.RootFS = rootfs;
  out.Metadata = { LastTagTime: d.lastTagTime ?? ZERO_TIME };
  return out;
}

export function shapeHistoryItem(h: ImageHistoryItem): Record<string, unknown> {
  return {
    Comment: h.comment,
    Created: h.created,
    CreatedBy: h.createdBy,
    Id: h.id,
    Size: h.size,
    Tags: h.tags,
  };
}

/** image-spec's Platform as Go decodes it (JSON keys matched without regard to case). */
const PLATFORM_FIELDS: Fields = {
  architecture: str,
  os: str,
  'os.version': str,
  'os.features': strings,
  variant: str,
};

/** Go's words for a JSON text that does not parse. */
function syntaxError(text: string, err: Error): string {
  const trimmed = text.trim();
  if (trimmed === '') return 'unexpected end of JSON input';
  const first = trimmed[0] as string;
  if (!/[[{"\-0-9tfn]/.test(first)) return `invalid character '${first}' looking for beginning of value`;
  if (/end of (JSON )?input|Unterminated|Expected/i.test(err.message) && !/position/.test(err.message))
    return 'unexpected end of JSON input';
  return err.message;
}

/**
 * moby's httputils.DecodePlatform: a JSON OCI platform (`{"os":"linux","architecture":"amd64"}`)
 * with both OS and architecture; a 400 otherwise, in dockerd's words.
 */
export function decodePlatform(text: string): OciPlatform {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalidParameter(`failed to parse platform: ${syntaxError(text, err as Error)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    if (value === null) value = {};
    else {
      const kind = Array.isArray(value) ? 'array' : typeof value === 'boolean' ? 'bool' : typeof value;
      throw invalidParameter(
        `failed to parse platform: json: cannot unmarshal ${kind} into Go value of type v1.Platform`,
      );
    }
  }
  let fields: Record<string, unknown>;
  try {
    fields = decodeStruct(value as Record<string, unknown>, PLATFORM_FIELDS, 'Platform', []);
  } catch (err) {
    throw invalidParameter(`failed to parse platform: ${(err as Error).message}`);
  }
  const p: OciPlatform = {
    os: (fields.os as string | null) ?? '',
    architecture: (fields.architecture as string | null) ?? '',
  };
  if (fields.variant) p.variant = fields.variant as string;
  if (fields['os.version']) p['os.version'] = fields['os.version'] as string;
  const features = fields['os.features'] as string[] | null | undefined;
  if (features?.length) p['os.features'] = features;
  const optional = Boolean(p.variant || p['os.version'] || p['os.features']);
  if (!p.os && !p.architecture && optional)
    throw invalidParameter('optional platform fields provided, but OS and Architecture are missing');
  if (!p.os || !p.architecture) throw invalidParameter('both OS and Architecture must be provided');
  return p;
}
