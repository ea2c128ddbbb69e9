import type { Descriptor } from '../manifests/types.js';

/**
 * What a manifest references, as distribution's `References()` lists them for
 * `notifications.events.includereferences`: an index's (or manifest list's) manifests, else the
 * config then the layers; each descriptor with the fields the reference keeps.
 */
export function manifestReferences(content: Buffer): Descriptor[] {
  let doc: { manifests?: unknown; config?: unknown; layers?: unknown };
  try {
    doc = JSON.parse(content.toString('utf8')) as typeof doc;
  } catch {
    return [];
  }
  const list = Array.isArray(doc.manifests)
    ? doc.manifests
    : [...(doc.config ? [doc.config] : []), ...(Array.isArray(doc.layers) ? doc.layers : [])];
  const out: Descriptor[] = [];
  for (const raw of list) {
    if (!raw || typeof raw !== 'object') continue;
    const d = raw as Record<string, unknown>;
    if (typeof d.digest !== 'string') continue;
    const desc: Descriptor = {
      mediaType: typeof d.mediaType === 'string' ? d.mediaType : '',
      size: typeof d.size === 'number' ? d.size : 0,
      digest: d.digest,
    };
    if (Array.isArray(d.urls)) desc.urls = d.urls.filter((u): u is string => typeof u === 'string');
    if (d.annotations && typeof d.annotations === 'object')
      desc.annotations = d.annotations as Record<string, string>;
    if (d.platform && typeof d.platform === 'object') desc.platform = d.platform as Record<string, unknown>;
    out.push(desc);
  }
  return out;
}
