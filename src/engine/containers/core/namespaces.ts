import { conflict } from '../../../common/errors.js';
import type { ContainerSet } from './set.js';

/** The namespace file of another running container (`container:<x>` modes). */
export function namespacePath(
  set: ContainerSet,
  ref: string,
  kind: 'net' | 'pid' | 'ipc' | 'uts',
  what: string,
): string {
  const other = set.get(ref);
  if (!other.state.Running || other.state.Restarting || other.state.Pid <= 0) {
    throw conflict(`cannot join ${what} of a non running container: ${other.id}`);
  }
  return `/proc/${other.state.Pid}/ns/${kind}`;
}
