import { readFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';

/**
 * Whether the kernel can carry ESP (IPsec), which encrypted overlays need: its build
 * configuration (/proc/config.gz) says `CONFIG_INET_ESP=y|m`. A kernel that does not say is
 * taken to lack it. The host call behind a small adapter (tests pass their own answer).
 */
export type EspProbe = () => Promise<boolean>;

export const kernelHasEsp: EspProbe = async () => {
  try {
    const config = gunzipSync(await readFile('/proc/config.gz')).toString('utf8');
    return /^CONFIG_INET_ESP=[ym]$/m.test(config);
  } catch {
    return false;
  }
};
