/** The pace of walks over a context's files (thousands of small ones, each read at once). */

/** Files up to this size are read in one synchronous call (a context has thousands of small ones). */
export const SMALL_FILE = 256 * 1024;

/** Lets other requests in at least every 20 ms of a long walk. */
export class Turns {
  private ran = Date.now();
  async take(): Promise<void> {
    if (Date.now() - this.ran > 20) {
      await new Promise((r) => setImmediate(r));
      this.ran = Date.now();
    }
  }
}
