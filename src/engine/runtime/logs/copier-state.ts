import { existsSync } from 'node:fs';
import { errnoCode } from '../../../common/errors.js';
import { readFile, rename, writeFile } from '../../../common/fs/quick.js';
import type { PendingState } from './assembler.js';
import type { FileIdentity } from './json-writer.js';

/**
 * Where a log copier is, as one consistent pair: the monitor's output up to `source.offset` (of
 * that file) is in the container's log up to `log.size` (of that file), and `pending` holds the
 * lines begun but not finished there. Written after each write to the log, so that a copier
 * started after a crash truncates what was written after it and reads on from there: nothing is
 * lost and nothing written twice.
 */
export interface CopierState {
  v: 1;
  source: (FileIdentity & { offset: number }) | null;
  log: FileIdentity & { size: number };
  pending?: PendingState;
}

function valid(s: unknown): s is CopierState {
  if (!s || typeof s !== 'object') return false;
  const st = s as Partial<CopierState>;
  const id = (x: unknown) =>
    !!x &&
    typeof x === 'object' &&
    typeof (x as FileIdentity).ino === 'number' &&
    typeof (x as FileIdentity).birth === 'number';
  return (
    st.v === 1 &&
    id(st.log) &&
    typeof st.log?.size === 'number' &&
    (st.source === null || (id(st.source) && typeof st.source?.offset === 'number'))
  );
}

/** The saved state, or null when there is none (or it is unreadable: start from the beginning). */
export async function loadCopierState(path: string): Promise<CopierState | null> {
  // none, the usual case (a first start): seen at once, without a thrown ENOENT
  if (!existsSync(path)) return null;
  try {
    const s: unknown = JSON.parse(await readFile(path, 'utf8'));
    return valid(s) ? s : null;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || err instanceof SyntaxError) return null;
    throw err;
  }
}

/**
 * Save the state: a temp file renamed over the old one, so a crash leaves one or the other. No
 * fsync: this guards against the engine dying, as the log itself (dockerd does not sync its logs
 * either).
 */
export async function saveCopierState(path: string, state: CopierState): Promise<void> {
  await writeFile(`${path}.tmp`, JSON.stringify(state));
  await rename(`${path}.tmp`, path);
}
