import type { IncomingMessage } from 'node:http';
import { BerthError, type ErrorKind } from '../../common/errors.js';
import { readBody } from './transport.js';

/** One entry of a registry's error body (`{"errors":[{"code","message","detail"}]}`). */
export interface RegistryErrorEntry {
  code: string;
  message: string;
}

/** What a registry answered with, kept on the error as its detail. */
export interface RegistryErrorDetail {
  status: number;
  errors: RegistryErrorEntry[];
}

function kindOf(status: number): ErrorKind {
  if (status === 404) return 'NotFound';
  if (status === 401) return 'Unauthorized';
  if (status === 403) return 'Forbidden';
  if (status === 429) return 'TooManyRequests';
  if (status === 400) return 'InvalidParameter';
  return 'Unavailable';
}

/**
 * The text of a registry error as Go's errcode.Error prints it: `<code in words>: <message>`
 * (`manifest unknown: manifest unknown`), or the status when the body says nothing.
 */
export function describeRegistryError(d: RegistryErrorDetail): string {
  const first = d.errors[0];
  if (!first) {
    if (d.status === 401) return 'unauthorized: authentication required';
    if (d.status === 403) return 'denied: requested access to the resource is denied';
    return `received unexpected HTTP status: ${d.status}`;
  }
  return `${first.code.toLowerCase().replace(/_/g, ' ')}: ${first.message}`;
}

/** A BerthError of the status's kind, with the registry's errors as its detail. */
export function registryError(d: RegistryErrorDetail, message = describeRegistryError(d)): BerthError {
  return new BerthError(kindOf(d.status), message, d);
}

/** Read an error answer (its body bounded) into a registry error. */
export async function errorFromResponse(res: IncomingMessage): Promise<BerthError> {
  const status = res.statusCode ?? 0;
  let errors: RegistryErrorEntry[] = [];
  try {
    const body = await readBody(res, 64 * 1024);
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: unknown };
    if (Array.isArray(parsed.errors)) {
      errors = parsed.errors
        .filter((e): e is Record<string, unknown> => !!e && typeof e === 'object')
        .map((e) => ({ code: String(e.code ?? 'UNKNOWN'), message: String(e.message ?? '') }));
    }
  } catch {
    res.destroy();
  }
  return registryError({ status, errors });
}

export function registryDetail(err: unknown): RegistryErrorDetail | undefined {
  if (!(err instanceof BerthError)) return undefined;
  const d = err.detail as RegistryErrorDetail | undefined;
  return d && typeof d.status === 'number' && Array.isArray(d.errors) ? d : undefined;
}
