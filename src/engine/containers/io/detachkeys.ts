import { invalidParameter } from '../../../common/errors.js';

/** Docker's default detach sequence: ctrl-p, ctrl-q. */
export const DEFAULT_DETACH_KEYS = 'ctrl-p,ctrl-q';

/** `ctrl-@` (0) to `ctrl-_` (31): the control characters a key spec may name. */
const CONTROL_NAMES = [
  'ctrl-@',
  ...Array.from({ length: 26 }, (_, i) => `ctrl-${String.fromCharCode(97 + i)}`),
  'ctrl-[',
  'ctrl-\\',
  'ctrl-]',
  'ctrl-^',
  'ctrl-_',
];

/**
 * Parse a detach-key spec (`ctrl-p,ctrl-q`, `a`, `ctrl-@`, `DEL`...) to bytes as dockerd does
 * (moby/term ToBytes): a one-byte key as it is, or a control name in lower case, or DEL.
 */
export function parseDetachKeys(spec: string): Buffer {
  const out: number[] = [];
  for (const key of spec.split(',')) {
    const bytes = Buffer.from(key, 'utf8');
    if (bytes.length === 1) out.push(bytes[0] as number);
    else if (CONTROL_NAMES.includes(key)) out.push(CONTROL_NAMES.indexOf(key));
    else if (key === 'DEL') out.push(127);
    else throw invalidParameter(`Invalid detach keys (${spec}) provided`);
  }
  return Buffer.from(out);
}

/**
 * Watches an input stream for the detach sequence. Bytes that could begin the sequence are held
 * back; when the sequence breaks they are released, when it completes `detached` is set.
 */
export class DetachScanner {
  private held: number[] = [];

  constructor(private readonly keys: Buffer) {}

  /** Returns the bytes to pass on, and whether the sequence completed (the rest is dropped). */
  push(chunk: Buffer): { pass: Buffer; detach: boolean } {
    if (this.keys.length === 0) return { pass: chunk, detach: false };
    const out: number[] = [];
    for (const b of chunk) {
      if (b === this.keys[this.held.length]) {
        this.held.push(b);
        if (this.held.length === this.keys.length) {
          this.held = [];
          return { pass: Buffer.from(out), detach: true };
        }
        continue;
      }
      if (this.held.length > 0) {
        out.push(...this.held);
        this.held = [];
        if (b === this.keys[0]) {
          this.held.push(b);
          continue;
        }
      }
      out.push(b);
    }
    return { pass: Buffer.from(out), detach: false };
  }
}
