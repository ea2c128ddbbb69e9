import { systemError } from '../errors.js';
import { runTool } from './run-tool.js';

/**
 * umount(8) of `target`, retried a few times while it is busy (a process of a container that
 * just ended may still hold it). A target that is not mounted, or gone, is no error.
 */
export async function unmountWithRetry(target: string): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const r = await runTool('umount', [target]);
    if (r.code === 0) return;
    if (/not mounted|no mount point specified|No such file or directory/i.test(r.stderr)) return;
    if (/busy/i.test(r.stderr) && attempt < 4) {
      await new Promise((res) => setTimeout(res, 50 * (attempt + 1)));
      continue;
    }
    throw systemError(`umount ${target}: ${r.stderr}`);
  }
}
