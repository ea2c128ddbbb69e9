import { createHash } from 'node:crypto';
import type { ImageConfigFile } from '../../../common/docker-types.js';
import { orderedContainerConfig } from '../config.js';

/**
 * The pre-1.10 half of docker save's archive: a directory per layer named by a v1 ID, with
 * `VERSION` (1.0), `json` (the layer's v1 image) and `layer.tar` (moby's image/v1 and
 * tarexport). The top layer's json carries the image's own fields; the ones below only a
 * creation time of 0. IDs are worked out as moby's v1.CreateID does.
 */

/** Go's encoding/json escapes these in strings (HTML safety); JSON text has them in strings only. */
export function goJsonEscape(text: string): string {
  return text.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Go's json.Marshal of a map: keys sorted. */
function sortedObject(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** moby's image.V1Image of the layer at `top` or below it, in its struct's field order (no id, parent). */
function v1Fields(config: ImageConfigFile, top: boolean): Record<string, unknown> {
  if (!top) {
    const out: Record<string, unknown> = {
      created: '1970-01-01T00:00:00Z',
      container_config: orderedContainerConfig(undefined),
    };
    if (config.os) out.os = config.os;
    return out;
  }
  const out: Record<string, unknown> = {};
  if (config.comment) out.comment = config.comment;
  out.created = config.created ?? '0001-01-01T00:00:00Z';
  if (config.container) out.container = config.container;
  out.container_config = orderedContainerConfig(config.container_config);
  if (config.docker_version) out.docker_version = config.docker_version;
  if (config.author) out.author = config.author;
  if (config.config) out.config = orderedContainerConfig(config.config);
  if (config.architecture) out.architecture = config.architecture;
  if (config.variant) out.variant = config.variant;
  if (config.os) out.os = config.os;
  return out;
}

export interface LegacyLayer {
  /** The v1 ID (64 hex). */
  id: string;
  /** The `json` file's text. */
  json: string;
}

/**
 * The legacy layers of an image: for each of its chain IDs (bottom first), the v1 ID and json,
 * each layer's parent the v1 ID below.
 */
export function legacyLayers(config: ImageConfigFile, chainIds: string[]): LegacyLayer[] {
  const out: LegacyLayer[] = [];
  let parent = '';
  chainIds.forEach((chainId, i) => {
    const top = i === chainIds.length - 1;
    const fields = v1Fields(config, top);
    // moby sets a lower layer's os after working out its ID
    const { os: _os, ...withoutOs } = fields;
    const forId: Record<string, unknown> = { ...(top ? fields : withoutOs), layer_id: chainId };
    if (parent) forId.parent = `sha256:${parent}`;
    const id = createHash('sha256')
      .update(goJsonEscape(JSON.stringify(sortedObject(forId))))
      .digest('hex');
    const json = goJsonEscape(JSON.stringify({ id, ...(parent ? { parent } : {}), ...fields }));
    out.push({ id, json });
    parent = id;
  });
  return out;
}
