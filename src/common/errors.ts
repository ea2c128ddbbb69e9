/**
 * Errors typed by kind. Services throw these; each server maps kinds to statuses in one place
 * (engine: src/engine/api/errors.ts, registry: src/registry/errors.ts).
 */
export type ErrorKind =
  | 'InvalidParameter'
  | 'NotFound'
  | 'Conflict'
  | 'NotModified'
  | 'Forbidden'
  | 'Unauthorized'
  | 'NotImplemented'
  | 'Unavailable'
  | 'NotAcceptable'
  | 'RangeNotSatisfiable'
  | 'TooLarge'
  | 'TooManyRequests'
  | 'System';

export class BerthError extends Error {
  readonly kind: ErrorKind;
  /** Optional machine-readable detail (the registry puts it in the error body). */
  readonly detail?: unknown;

  constructor(kind: ErrorKind, message: string, detail?: unknown) {
    super(message);
    this.kind = kind;
    this.detail = detail;
    this.name = `${kind}Error`;
  }
}

export const invalidParameter = (message: string, detail?: unknown): BerthError =>
  new BerthError('InvalidParameter', message, detail);
export const notFound = (message: string, detail?: unknown): BerthError =>
  new BerthError('NotFound', message, detail);
export const conflict = (message: string, detail?: unknown): BerthError =>
  new BerthError('Conflict', message, detail);
export const notModified = (message = ''): BerthError => new BerthError('NotModified', message);
export const forbidden = (message: string, detail?: unknown): BerthError =>
  new BerthError('Forbidden', message, detail);
export const unauthorized = (message: string, detail?: unknown): BerthError =>
  new BerthError('Unauthorized', message, detail);
export const notImplemented = (message: string): BerthError => new BerthError('NotImplemented', message);
export const unavailable = (message: string): BerthError => new BerthError('Unavailable', message);
export const notAcceptable = (message: string): BerthError => new BerthError('NotAcceptable', message);
export const systemError = (message: string, detail?: unknown): BerthError =>
  new BerthError('System', message, detail);

export function isBerthError(err: unknown): err is BerthError {
  return err instanceof BerthError;
}

export function isKind(err: unknown, kind: ErrorKind): boolean {
  return err instanceof BerthError && err.kind === kind;
}

/** Node's fs error with a code, narrowed. */
export function errnoCode(err: unknown): string | undefined {
  if (
    err &&
    typeof err === 'object' &&
    'code' in err &&
    typeof (err as { code: unknown }).code === 'string'
  ) {
    return (err as { code: string }).code;
  }
  return undefined;
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
