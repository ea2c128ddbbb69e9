import { invalidParameter } from '../../common/errors.js';

/** Driver options the local driver knows (as moby's local driver). */
const VALID = new Set(['type', 'o', 'device', 'size']);
/** An option that needs another. */
const REQUIRES: Record<string, string[]> = { device: ['type'], type: ['device'], o: ['device'] };

/** Validate local driver options; 400 with dockerd's messages. */
export function checkLocalOptions(opts: Record<string, string>): void {
  for (const [key, value] of Object.entries(opts)) {
    if (!VALID.has(key)) throw invalidParameter(`invalid option key: ${JSON.stringify(key)}`);
    if (typeof value !== 'string') throw invalidParameter(`invalid option value for ${JSON.stringify(key)}`);
  }
  for (const [key, needs] of Object.entries(REQUIRES)) {
    if (!(key in opts)) continue;
    for (const need of needs) {
      if (!(need in opts)) throw invalidParameter(`missing required option: ${JSON.stringify(need)}`);
    }
  }
  if (opts.size !== undefined && opts.size !== '' && opts.size !== '0') {
    throw invalidParameter('quota size requested but no quota support');
  }
}

/** A volume whose `_data` gets a mount of its own (tmpfs, a bind, a device) while it is in use. */
export function needsMount(opts: Record<string, string>): boolean {
  return Boolean(opts.type || opts.device);
}

/** Mount arguments for a local volume with options. A bind (`o=bind`) gets its device as a path. */
export function mountArgs(opts: Record<string, string>): { type: string; device: string; options: string } {
  return { type: opts.type ?? '', device: opts.device ?? '', options: opts.o ?? '' };
}
