import { DigestError, type ParsedDigest, parseDigest } from '../common/digest.js';
import { RegistryError } from './errors.js';

/** One path component of a repository name. */
const COMPONENT = /^[a-z0-9]+(?:[._-][a-z0-9]+)*$/;
/** A tag: word character first, then up to 127 word characters, dots or dashes. */
const TAG = /^[\w][\w.-]{0,127}$/;

export const MAX_NAME_LENGTH = 255;

export function isValidName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_NAME_LENGTH) return false;
  for (const component of name.split('/')) {
    if (!COMPONENT.test(component)) return false;
  }
  return true;
}

/** Validate a repository name; NAME_INVALID (400) otherwise. */
export function checkName(name: string): string {
  if (!isValidName(name)) {
    const why =
      name.length > MAX_NAME_LENGTH
        ? `repository name must be shorter than 256 characters (got ${name.length})`
        : `invalid repository name ${JSON.stringify(name)}: components must match [a-z0-9]+(?:[._-][a-z0-9]+)*`;
    throw new RegistryError('NAME_INVALID', why, { name });
  }
  return name;
}

export function isValidTag(tag: string): boolean {
  return TAG.test(tag);
}

export function checkTag(tag: string): string {
  if (!isValidTag(tag)) {
    throw new RegistryError(
      'TAG_INVALID',
      `invalid tag ${JSON.stringify(tag)}: must match [\\w][\\w.-]{0,127}`,
      {
        tag,
      },
    );
  }
  return tag;
}

/** Validate a digest from a request; DIGEST_INVALID (400) for malformed or unsupported digests. */
export function checkDigest(value: string): ParsedDigest {
  try {
    return parseDigest(value);
  } catch (err) {
    const message = err instanceof DigestError ? err.message : `invalid digest ${JSON.stringify(value)}`;
    throw new RegistryError('DIGEST_INVALID', message, { digest: value });
  }
}

export type Reference = { kind: 'tag'; tag: string } | { kind: 'digest'; digest: ParsedDigest };

/** A manifest reference: a digest when it holds a ':', a tag otherwise. */
export function parseReference(reference: string): Reference {
  if (reference.includes(':')) return { kind: 'digest', digest: checkDigest(reference) };
  return { kind: 'tag', tag: checkTag(reference) };
}

/** A manifest reference, or undefined when it is neither a valid tag nor a valid digest. */
export function tryParseReference(reference: string): Reference | undefined {
  if (!reference.includes(':')) return isValidTag(reference) ? { kind: 'tag', tag: reference } : undefined;
  try {
    return { kind: 'digest', digest: parseDigest(reference) };
  } catch {
    return undefined;
  }
}
