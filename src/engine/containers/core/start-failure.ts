import { errorMessage } from '../../../common/errors.js';

/**
 * The runtime refused a limit of the request: the kernel refused the value (EINVAL, ERANGE on a
 * cgroup file: a real-time runtime above what the parent cgroup allows, a negative CPU quota
 * other than -1...) or runc's own bounds did (cpu-shares outside [2, 262144] on cgroup v1). The
 * request's values are wrong, not the engine; dockerd answers 500 for these.
 */
export function runtimeRefusedLimit(message: string): boolean {
  return (
    /failed to write[^\n]*(invalid argument|numerical result out of range)/i.test(message) ||
    /the (maximum|minimum) allowed cpu-shares is \d+/i.test(message)
  );
}

/**
 * Exit code and message of a failed start, as dockerd's translateContainerdStartErr decides: 127
 * when the message names the command as not found, 126 when it was refused (permission denied),
 * 127 for a mount of a file onto a directory or the other way (with dockerd's hint); those are
 * the user's errors (400), as is a limit the runtime refused (runtimeRefusedLimit). Anything else (a volume that would not mount, the runtime failing)
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
  if (runtime && runtimeRefusedLimit(message)) return { exitCode: 128, message, userError: true };
  if (runtime && lower.includes('not a directory')) {
    message +=
      ': Are you trying to mount a directory onto a file (or vice-versa)? Check if the specified host path exists and is the expected type';
    return { exitCode: 127, message, userError: true };
  }
  return { exitCode: 128, message, userError: false };
}
