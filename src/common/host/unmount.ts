import { systemError } from '../errors.js';
import { runTool } from './run-tool.js';
import { SysCallError, type SysHelper, sysHelper } from './sys-helper.js';

const busyDelay = (attempt: number) => new Promise((res) => setTimeout(res, 50 * (attempt + 1)));

/**
 * Unmount `target`, retried a few times while it is busy (a process of a container that just
 * ended may still hold it). A target that is not mounted, or gone, is no error. umount2(2) through
 * berth-sys when it was built (`sys`, by default the process's helper), else umount(8).
 */
export async function unmountWithRetry(target: string, sys: SysHelper | null = sysHelper()): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    if (sys) {
      try {
        await sys.umount(target);
        return;
      } catch (err) {
        if (!(err instanceof SysCallError)) throw systemError(`umount ${target}: ${String(err)}`);
        if (err.code === 'EINVAL' || err.code === 'ENOENT') return;
        if (err.code === 'EBUSY' && attempt < 4) {
          await busyDelay(attempt);
          continue;
        }
        throw systemError(`umount ${target}: ${err.message}`);
      }
    }
    const r = await runTool('umount', [target]);
    if (r.code === 0) return;
    if (/not mounted|no mount point specified|No such file or directory/i.test(r.stderr)) return;
    if (/busy/i.test(r.stderr) && attempt < 4) {
      await busyDelay(attempt);
      continue;
    }
    throw systemError(`umount ${target}: ${r.stderr}`);
  }
}
