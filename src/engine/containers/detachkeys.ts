import { invalidParameter } from '../../common/errors.js';

/** Docker's default detach sequence: ctrl-p, ctrl-q. */
export const DEFAULT_DETACH_KEYS = 'ctrl-p,ctrl-q';

/**
 * Parse a detach-key spec (`ctrl-p,ctrl-q`, `a`, `ctrl-@`...) to bytes, as dockerd does:
 * a single character, or `ctrl-<value>` with value in a-z, @, ^, [, \, ], _ or `,`.
 */
export function parseDetachKeys(spec: string): Buffer {
  const out: number[] = [];
  for (const key of spec.split(',')) {
    if (key.length > 1 && key.toLowerCase().startsWith('ctrl-')) {
      const v = key.slice(5);
      if (v.length !== 1) throw invalidParameter(`Invalid escape keys (${spec}) provided`);
      const c = v.toLowerCase();
      if (c >= 'a' && c <= 'z') out.push(c.charCodeAt(0) - 96);
      else if (c === '@') out.push(0);
      else if (c === '[') out.push(27);
      else if (c === '\\') out.push(28);
      else if (c === ']') out.push(29);
      else if (c === '^') out.push(30);
      else if (c === '_') out.push(31);
      else throw invalidParameter(`Invalid escape keys (${spec}) provided`);
    } else if (key.length === 1) {
      out.push(key.charCodeAt(0));
    } else {
      throw invalidParameter(`Invalid escape keys (${spec}) provided`);
    }
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
