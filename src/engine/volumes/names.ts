import { randomBytes } from 'node:crypto';
import { invalidParameter } from '../../common/errors.js';

/** The local driver's name rule (dockerd: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`, so at least two characters). */
export const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

/** dockerd 23+ labels volumes it made for a container (`-v /path`, image VOLUME) with this key. */
export const ANONYMOUS_LABEL = 'com.docker.volume.anonymous';

export function checkVolumeName(name: string): void {
  if (!VOLUME_NAME.test(name)) {
    throw invalidParameter(
      `create ${name}: "${name}" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path`,
    );
  }
}

/** A fresh anonymous volume name: 64 hex digits, as dockerd generates. */
export function anonymousName(): string {
  return randomBytes(32).toString('hex');
}
