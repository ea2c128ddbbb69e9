import { BerthError } from './errors.js';
import { compileGoRegExp } from './go-regexp.js';

/**
 * Image references, as Docker's distribution/reference package parses and prints them.
 *
 *   reference       := name [ ":" tag ] [ "@" digest ]
 *   name            := [domain '/'] path-component ['/' path-component]*
 *   domain          := host [':' port-number]
 *   host            := domain-name | IPv4address | \[ IPv6address \]
 *   domain-name     := domain-component ['.' domain-component]*
 *   domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
 *   path-component  := alpha-numeric [separator alpha-numeric]*
 *   alpha-numeric   := /[a-z0-9]+/
 *   separator       := /[_.]|__|[-]+/
 *   tag             := /[\w][\w.-]{0,127}/
 *   digest          := algorithm ":" hex (at least 32 hex digits)
 *
 * Normalisation (ParseNormalizedNamed): a first component without '.', ':' and other than
 * `localhost` is not a domain, so `busybox` is `docker.io/library/busybox`; the familiar form
 * strips `docker.io/` and `library/` again.
 */

export const DEFAULT_DOMAIN = 'docker.io';
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
const OFFICIAL_REPO_PREFIX = 'library/';
export const NAME_TOTAL_LENGTH_MAX = 255;

const alphaNumeric = '[a-z0-9]+';
const separator = '(?:[._]|__|[-]+)';
const pathComponent = `${alphaNumeric}(?:${separator}${alphaNumeric})*`;
const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const ipv6 = '\\[(?:[a-fA-F0-9:]+)\\]';
const domainName = `${domainComponent}(?:\\.${domainComponent})*`;
const domainPat = `(?:${domainName}|${ipv6})(?::[0-9]+)?`;
const tagPat = '[\\w][\\w.-]{0,127}';
const digestPat = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const namePat = `(?:${domainPat}/)?${pathComponent}(?:/${pathComponent})*`;

const referenceRegexp = new RegExp(`^(${namePat})(?::(${tagPat}))?(?:@(${digestPat}))?$`);
const anchoredNameRegexp = new RegExp(`^(?:(${domainPat})/)?(${pathComponent}(?:/${pathComponent})*)$`);
const anchoredTagRegexp = new RegExp(`^${tagPat}$`);
const anchoredIdentifierRegexp = /^[a-f0-9]{64}$/;
const shortIdentifierRegexp = /^[a-f0-9]{1,64}$/;

/** Messages exactly as distribution/reference words them (dockerd passes them on). */
export const ReferenceErrors = {
  invalidFormat: 'invalid reference format',
  tagInvalidFormat: 'invalid tag format',
  digestInvalidFormat: 'invalid digest format',
  nameContainsUppercase: 'repository name must be lowercase',
  normalizedUppercase: 'invalid reference format: repository name must be lowercase',
  nameEmpty: 'repository name must have at least one component',
  nameTooLong: `repository name must not be more than ${NAME_TOTAL_LENGTH_MAX} characters`,
} as const;

/** A malformed reference: an InvalidParameter error (400) with distribution's message. */
export class InvalidReferenceError extends BerthError {
  constructor(message: string) {
    super('InvalidParameter', message);
  }
}

/** A parsed, normalised reference. `domain` and `path` are always set (`docker.io`, `library/busybox`). */
export interface Reference {
  domain: string;
  path: string;
  tag?: string;
  digest?: string;
}

/** `docker.io/library/busybox` */
export function fullName(ref: Reference): string {
  return `${ref.domain}/${ref.path}`;
}

/** `busybox`, `localhost:5000/foo`, `user/repo`. */
export function familiarName(ref: Reference): string {
  if (ref.domain === DEFAULT_DOMAIN) {
    if (
      ref.path.startsWith(OFFICIAL_REPO_PREFIX) &&
      !ref.path.slice(OFFICIAL_REPO_PREFIX.length).includes('/')
    ) {
      return ref.path.slice(OFFICIAL_REPO_PREFIX.length);
    }
    return ref.path;
  }
  return `${ref.domain}/${ref.path}`;
}

function suffix(ref: Reference): string {
  return `${ref.tag !== undefined ? `:${ref.tag}` : ''}${ref.digest !== undefined ? `@${ref.digest}` : ''}`;
}

/** `docker.io/library/busybox:latest` */
export function referenceString(ref: Reference): string {
  return fullName(ref) + suffix(ref);
}

/** `busybox:latest`, `localhost:5000/foo:1`, `busybox@sha256:...` */
export function familiarString(ref: Reference): string {
  return familiarName(ref) + suffix(ref);
}

/** Add `latest` to a name without tag or digest (reference.TagNameOnly). */
export function tagNameOnly(ref: Reference): Reference {
  if (ref.tag === undefined && ref.digest === undefined) return { ...ref, tag: 'latest' };
  return ref;
}

function splitDockerDomain(name: string): { domain: string; remainder: string } {
  const i = name.indexOf('/');
  let domain: string;
  let remainder: string;
  const first = i === -1 ? '' : name.slice(0, i);
  if (i === -1 || (!/[.:]/.test(first) && first !== 'localhost' && first.toLowerCase() === first)) {
    domain = DEFAULT_DOMAIN;
    remainder = name;
  } else {
    domain = first;
    remainder = name.slice(i + 1);
  }
  if (domain === LEGACY_DEFAULT_DOMAIN) domain = DEFAULT_DOMAIN;
  if (domain === DEFAULT_DOMAIN && !remainder.includes('/')) remainder = OFFICIAL_REPO_PREFIX + remainder;
  return { domain, remainder };
}

function checkDigest(digest: string): void {
  const colon = digest.indexOf(':');
  const algorithm = digest.slice(0, colon);
  const hex = digest.slice(colon + 1);
  const lengths: Record<string, number> = { sha256: 64, sha384: 96, sha512: 128 };
  const want = lengths[algorithm];
  if (want === undefined) throw new InvalidReferenceError('unsupported digest algorithm');
  if (hex.length !== want) throw new InvalidReferenceError('invalid checksum digest length');
  if (!/^[a-f0-9]+$/.test(hex)) throw new InvalidReferenceError('invalid checksum digest format');
}

/** reference.Parse: the grammar without normalisation. The name must already be fully qualified to be meaningful. */
function parseRaw(s: string): { name: string; tag?: string; digest?: string } {
  const m = referenceRegexp.exec(s);
  if (!m) {
    if (s === '') throw new InvalidReferenceError(ReferenceErrors.nameEmpty);
    if (referenceRegexp.test(s.toLowerCase()))
      throw new InvalidReferenceError(ReferenceErrors.nameContainsUppercase);
    throw new InvalidReferenceError(ReferenceErrors.invalidFormat);
  }
  const name = m[1] ?? '';
  if (name.length > NAME_TOTAL_LENGTH_MAX) throw new InvalidReferenceError(ReferenceErrors.nameTooLong);
  const out: { name: string; tag?: string; digest?: string } = { name };
  if (m[2] !== undefined) out.tag = m[2];
  if (m[3] !== undefined) {
    checkDigest(m[3]);
    out.digest = m[3];
  }
  return out;
}

/**
 * ParseNormalizedNamed: `busybox` -> docker.io/library/busybox (no tag added; see tagNameOnly).
 * Throws InvalidReferenceError with dockerd's messages.
 */
export function parseNormalizedNamed(s: string): Reference {
  if (anchoredIdentifierRegexp.test(s)) {
    throw new InvalidReferenceError(
      `invalid repository name (${s}), cannot specify 64-byte hexadecimal strings`,
    );
  }
  const { domain, remainder } = splitDockerDomain(s);
  let nameOnly = remainder;
  const tagSep = remainder.indexOf(':');
  if (tagSep > -1) nameOnly = remainder.slice(0, tagSep);
  if (nameOnly.toLowerCase() !== nameOnly)
    throw new InvalidReferenceError(ReferenceErrors.normalizedUppercase);
  const raw = parseRaw(`${domain}/${remainder}`);
  const nm = anchoredNameRegexp.exec(raw.name);
  if (!nm) throw new InvalidReferenceError(ReferenceErrors.invalidFormat);
  const ref: Reference = { domain: nm[1] ?? DEFAULT_DOMAIN, path: nm[2] ?? '' };
  if (raw.tag !== undefined) ref.tag = raw.tag;
  if (raw.digest !== undefined) ref.digest = raw.digest;
  return ref;
}

/** Parse and add `:latest` when neither tag nor digest is given (ParseNormalizedNamed + TagNameOnly). */
export function parseTaggedOrLatest(s: string): Reference {
  return tagNameOnly(parseNormalizedNamed(s));
}

/** Like parseNormalizedNamed but answers undefined instead of throwing. */
export function tryParseNormalizedNamed(s: string): Reference | undefined {
  try {
    return parseNormalizedNamed(s);
  } catch {
    return undefined;
  }
}

/** reference.WithTag: replace the tag (and drop a digest), checking the tag grammar. */
export function withTag(ref: Reference, tag: string): Reference {
  if (!isValidTag(tag)) throw new InvalidReferenceError(ReferenceErrors.tagInvalidFormat);
  return { domain: ref.domain, path: ref.path, tag };
}

/** reference.WithDigest. */
export function withDigest(ref: Reference, digest: string): Reference {
  if (!new RegExp(`^${digestPat}$`).test(digest))
    throw new InvalidReferenceError(ReferenceErrors.digestInvalidFormat);
  checkDigest(digest);
  const out: Reference = { domain: ref.domain, path: ref.path, digest };
  if (ref.tag !== undefined) out.tag = ref.tag;
  return out;
}

export function isValidTag(tag: string): boolean {
  return anchoredTagRegexp.test(tag);
}

/** A full image/content ID: 64 lowercase hex digits. */
export function isFullId(s: string): boolean {
  return anchoredIdentifierRegexp.test(s);
}

/** Could `s` be a (short) ID, with or without `sha256:`? */
export function isIdPrefix(s: string): boolean {
  const hex = s.startsWith('sha256:') ? s.slice(7) : s;
  return shortIdentifierRegexp.test(hex);
}

/** The kinds of thing a user may name an image by (reference.ParseAnyReference). */
export type AnyReference = { kind: 'id'; id: string } | { kind: 'named'; ref: Reference };

/**
 * ParseAnyReference: a 64-hex string or `sha256:<64 hex>` is an ID; anything else must be a
 * (normalised) name. Throws InvalidReferenceError.
 */
export function parseAnyReference(s: string): AnyReference {
  if (anchoredIdentifierRegexp.test(s)) return { kind: 'id', id: `sha256:${s}` };
  if (/^sha256:[a-f0-9]{64}$/.test(s)) return { kind: 'id', id: s };
  return { kind: 'named', ref: parseNormalizedNamed(s) };
}

/**
 * Go's path.Match, as reference.FamiliarMatch uses it: `*` matches any run of non-'/' characters,
 * `?` one non-'/' character, `[...]` a class (with `^` negation and ranges), `\\` escapes.
 * Throws on a malformed pattern ("syntax error in pattern").
 */
export function pathMatch(pattern: string, name: string): boolean {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '\\') {
      i++;
      if (i >= pattern.length) throw new InvalidReferenceError('syntax error in pattern');
      re += escapeRe(pattern[i] as string);
    } else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close < 0) throw new InvalidReferenceError('syntax error in pattern');
      let body = pattern.slice(i + 1, close);
      let negate = false;
      if (body.startsWith('^')) {
        negate = true;
        body = body.slice(1);
      }
      if (body === '') throw new InvalidReferenceError('syntax error in pattern');
      const cls = body.replace(/[\]\\^]/g, (m) => `\\${m}`);
      re += negate ? `[^/${cls}]` : `[${cls}]`;
      i = close;
    } else re += escapeRe(c);
  }
  re += '$';
  try {
    // RE2: linear time, whatever the pattern's stars (a backtracking RegExp is exponential)
    return compileGoRegExp(re).test(name);
  } catch {
    throw new InvalidReferenceError('syntax error in pattern');
  }
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** reference.FamiliarMatch: the pattern against `name:tag`, then against the bare familiar name. */
export function familiarMatch(pattern: string, ref: Reference): boolean {
  if (pathMatch(pattern, familiarString(ref))) return true;
  return pathMatch(pattern, familiarName(ref));
}
