import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/**
 * Content digests: `algorithm ":" encoded`, as the OCI image spec defines them.
 *
 * algorithm            ::= component (separator component)*
 * component            ::= [a-z0-9]+
 * separator            ::= [+._-]
 * encoded              ::= [a-zA-Z0-9=_-]+
 *
 * Registered algorithms (sha256, sha512) also fix the length and alphabet of the encoded part
 * (lowercase hex). Everything that is grammatical but not registered is "unsupported".
 */
export type DigestAlgorithm = 'sha256' | 'sha512';

export interface ParsedDigest {
  algorithm: DigestAlgorithm;
  hex: string;
  /** The digest string, `algorithm:hex`. */
  digest: string;
}

const GRAMMAR = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;
const HEX_LENGTH: Record<DigestAlgorithm, number> = { sha256: 64, sha512: 128 };

export class DigestError extends Error {
  constructor(
    message: string,
    /** 'invalid' for a malformed digest, 'unsupported' for a well-formed one of an unknown algorithm. */
    readonly reason: 'invalid' | 'unsupported',
  ) {
    super(message);
    this.name = 'DigestError';
  }
}

export function isDigestAlgorithm(value: string): value is DigestAlgorithm {
  return value === 'sha256' || value === 'sha512';
}

/** Parse and validate a digest; throws DigestError. */
export function parseDigest(value: string): ParsedDigest {
  if (typeof value !== 'string' || value.length > 256 || !GRAMMAR.test(value)) {
    throw new DigestError(`invalid digest ${JSON.stringify(value)}`, 'invalid');
  }
  const colon = value.indexOf(':');
  const algorithm = value.slice(0, colon);
  const hex = value.slice(colon + 1);
  if (!isDigestAlgorithm(algorithm)) {
    throw new DigestError(`unsupported digest algorithm ${JSON.stringify(algorithm)}`, 'unsupported');
  }
  if (hex.length !== HEX_LENGTH[algorithm] || !/^[a-f0-9]+$/.test(hex)) {
    throw new DigestError(
      `invalid ${algorithm} digest ${JSON.stringify(value)}: expected ${HEX_LENGTH[algorithm]} lowercase hex digits`,
      'invalid',
    );
  }
  return { algorithm, hex, digest: value };
}

/** Like parseDigest but answers undefined instead of throwing. */
export function tryParseDigest(value: string): ParsedDigest | undefined {
  try {
    return parseDigest(value);
  } catch {
    return undefined;
  }
}

export function isDigest(value: string): boolean {
  return tryParseDigest(value) !== undefined;
}

export function newHash(algorithm: DigestAlgorithm = 'sha256'): Hash {
  return createHash(algorithm);
}

export function digestOf(data: string | Uint8Array, algorithm: DigestAlgorithm = 'sha256'): string {
  return `${algorithm}:${createHash(algorithm).update(data).digest('hex')}`;
}

export function sha256Digest(data: string | Uint8Array): string {
  return digestOf(data, 'sha256');
}

/** Digest of a file, streamed. */
export async function digestFile(path: string, algorithm: DigestAlgorithm = 'sha256'): Promise<string> {
  const hash = createHash(algorithm);
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
    hash.update(chunk as Buffer);
  }
  return `${algorithm}:${hash.digest('hex')}`;
}
