import { errorMessage } from '../../../common/errors.js';

/**
 * The runtime could not write a limit because the kernel refused the value (EINVAL, ERANGE on a
 * cgroup file): the request's values are wrong, not the engine (a real-time runtime above what
 * the parent cgroup allows, a negative CPU quota other than -1...). dockerd answers 500 for these.
 */
export function kernelRefusedValue(message: string): boolean {
  return /failed to write[^\n]*(invalid argument|numerical result out of range)/i.test(message);
}

/**
 * Exit code and message of a failed start, as dockerd's translateContainerdStartErr decides: 127
 * when the message names the command as not found, 126 when it was refused (permission denied),
 * 127 for a mount of a file onto a directory or the other way (with dockerd's hint); those are
 * the user's errors (400), as is a limit the kernel refused (kernelRefusedValue). Anything else (a volume that would not mount, the runtime failing)
 * is 128 and the engine's.
 */
export function startFailure(
  err: unknown,
  cmd: string,
): { exitCode: number; message: string; userError: boolean } {
  let message = errorMessage(err);
  const lower = message.toLowerCase();
  const runtime = lower.includes('oci runtime');
  const notFound = /executable file not found|no such file or directory/.test(lower);
  // runc names the process it could not exec quoted as Go's %q does (a tab is `"\t"`), so the
  // command as given may not be in the message: its `exec: "...":` is the command all the same
  if (
    runtime &&
    notFound &&
    ((cmd !== '' && lower.includes(cmd.toLowerCase())) || /exec: "(?:[^"\\]|\\.)*": /.test(message))
  ) {
    return { exitCode: 127, message, userError: true };
  }
  if (runtime && lower.includes('permission denied')) return { exitCode: 126, message, userError: true };
  if (runtime && kernelRefusedValue(message)) return { exitCode: 128, message, userError: true };
  if (runtime && lower.includes('not a directory')) {
    message +=
      ': Are you trying to mount a directory onto a file (or vice-versa)? Check if the specified host path exists and is the expected type';
    return { exitCode: 127, message, userError: true };
  }
  return { exitCode: 128, message, userError: false };
}
