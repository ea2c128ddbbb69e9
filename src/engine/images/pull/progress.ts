import type { PullMessage } from '../images.types.js';

/** dockerd's short layer IDs in progress lines: 12 hex digits of the blob digest. */
export function shortId(digest: string): string {
  return digest.replace(/^sha256:/, '').slice(0, 12);
}

/** How often one layer's Downloading line may be sent (dockerd: every 512 KiB or 100 ms). */
const MIN_INTERVAL_MS = 100;

/**
 * The progress of a pull as dockerd writes it: one sender for the whole pull, per-layer
 * Downloading lines throttled (the first and the last always go out).
 */
export class PullProgress {
  private readonly last = new Map<string, number>();

  constructor(private readonly send: (m: PullMessage) => void) {}

  status(status: string, id?: string): void {
    this.send(id === undefined ? { status } : { status, id });
  }

  /** A layer step with an empty progressDetail (`Pulling fs layer`, `Waiting`, `Pull complete`...). */
  layer(id: string, status: string): void {
    this.send({ status, id, detail: {} });
  }

  /** `Downloading` / `Extracting` with current and total; throttled unless it is the last. */
  bytes(id: string, status: string, current: number, total: number | undefined, force = false): void {
    const key = `${status}|${id}`;
    const now = Date.now();
    const prev = this.last.get(key);
    const done = total !== undefined && current >= total;
    if (!force && !done && prev !== undefined && now - prev < MIN_INTERVAL_MS) return;
    this.last.set(key, now);
    const detail: { current: number; total?: number } = { current };
    if (total !== undefined && total > 0) detail.total = total;
    this.send({ status, id, detail });
  }
}
