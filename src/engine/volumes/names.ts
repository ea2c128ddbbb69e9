import { randomBytes } from 'node:crypto';
import { invalidParameter } from '../../common/errors.js';

/** The local driver's name rule (dockerd: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`, so at least two characters). */
export const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

/** The longest name a volume directory can have (NAME_MAX, in bytes). */
export const NAME_MAX = 255;

/** dockerd 23+ labels volumes it made for a container (`-v /path`, image VOLUME) with this key. */
export const ANONYMOUS_LABEL = 'com.docker.volume.anonymous';

/**
 * The local driver's name check, with dockerd's messages (the caller adds `create <name>: `):
 * one byte is "too short", anything outside the rule "invalid characters".
 */
export function checkVolumeName(name: string): void {
  if (Buffer.byteLength(name) === 1) {
    throw invalidParameter('volume name is too short, names should be at least two alphanumeric characters');
  }
  if (!VOLUME_NAME.test(name)) {
    throw invalidParameter(
      `${JSON.stringify(name)} includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path`,
    );
  }
}

/** A fresh anonymous volume name: 64 hex digits, as dockerd generates. */
export function anonymousName(): string {
  return randomBytes(32).toString('hex');
}
