import { BerthError, type ErrorKind, errnoCode, errorMessage } from '../../../common/errors.js';

/** What turns a host path back into the container's (ContainerFs). */
export interface PathMapper {
  containerPathOf(hostPath: string): string | undefined;
}

/** Go's texts for the errors a copy meets (what dockerd prints after `lstat <path>: `). */
const GO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  EISDIR: 'is a directory',
  EEXIST: 'file exists',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
  EXDEV: 'invalid cross-device link',
  EMLINK: 'too many links',
  EPERM: 'operation not permitted',
  EACCES: 'permission denied',
  EROFS: 'read-only file system',
  EINVAL: 'invalid argument',
  ENOTEMPTY: 'directory not empty',
  EBUSY: 'device or resource busy',
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EIO: 'input/output error',
};

/** The error kind of a failed file operation of a copy: what the archive or path asked is 4xx. */
function kindOf(code: string | undefined): ErrorKind {
  switch (code) {
    case 'ENOENT':
      return 'NotFound';
    case 'EACCES':
    case 'EROFS':
      return 'Forbidden';
    case 'ENOTDIR':
    case 'EISDIR':
    case 'EEXIST':
    case 'ELOOP':
    case 'ENAMETOOLONG':
    case 'EXDEV':
    case 'EMLINK':
    case 'EPERM':
    case 'EINVAL':
    case 'ENOTEMPTY':
    case 'EBUSY':
      return 'InvalidParameter';
    default:
      return 'System';
  }
}

interface NodeSystemError {
  code?: string;
  syscall?: string;
  path?: string;
  dest?: string;
}

/**
 * An error of a container's file operation as the client may see it: a node fs error (whose
 * message names host paths) becomes Go's `<op> <container path>: <text>` with a kind for its
 * cause; the engine's own errors pass unchanged; anything else keeps no path it cannot map.
 */
export function inContainerTerms(err: unknown, paths: PathMapper): unknown {
  if (err instanceof BerthError) return err;
  const e = (err ?? {}) as NodeSystemError;
  const code = errnoCode(err);
  if (code && e.syscall) {
    const shown = [e.path, e.dest]
      .filter((p): p is string => typeof p === 'string')
      .map((p) => paths.containerPathOf(p) ?? '<outside the container>');
    const text = GO_TEXT[code] ?? code.toLowerCase();
    return new BerthError(kindOf(code), `${[e.syscall, ...shown].join(' ')}: ${text}`);
  }
  return new BerthError(
    'System',
    errorMessage(err).replace(/\/\S*/g, (p) => paths.containerPathOf(p) ?? '<path>'),
  );
}

/** The reason at the end of a host tool's message (`mknod: <path>: Operation not permitted`). */
export function toolReason(err: unknown): string {
  const parts = errorMessage(err).trim().split(': ');
  return (parts[parts.length - 1] ?? '').toLowerCase();
}
