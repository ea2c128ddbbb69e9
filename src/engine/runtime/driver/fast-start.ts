import { closeSync, constants, openSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What `crun start` does for a container it created (crun 1.x, `libcrun_container_start`, for a
 * spec without poststart hooks or a notify socket, as berth's are), done in-process: it saves one
 * runtime invocation on every start. crun's create leaves the container's init blocked reading
 * `<root>/<id>/exec.fifo`; start opens its writing end, unlinks it (so that `crun state` says
 * running) and writes one byte, on which the init goes on to exec the process.
 *
 * Returns false, having changed nothing, when the fifo cannot be opened (gone: started already;
 * ENXIO: no reader, the init died): the caller runs `crun start` then, for its own answer.
 */
export async function startCreatedCrun(stateRoot: string, id: string): Promise<boolean> {
  const fifo = join(stateRoot, id, 'exec.fifo');
  let fd: number;
  try {
    // non-blocking: the init holds the reading end, or the open fails at once with ENXIO (each
    // step is one system call that does not wait: done at once, not in the thread pool)
    fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    unlinkSync(fifo);
    writeSync(fd, Buffer.alloc(1));
    return true;
  } finally {
    closeSync(fd);
  }
}
