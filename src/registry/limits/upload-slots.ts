import { RegistryError } from '../errors.js';

/**
 * Upload requests in flight per client: a request that sends blob data (a PATCH, a PUT with a
 * final chunk, a monolithic POST) takes a slot of its client for as long as it runs; beyond
 * `maxPerClient` it is refused with 429 TOOMANYREQUESTS (Retry-After: 1). 0 means no limit.
 * Memory is bounded by the requests in flight: a client without any has no entry.
 */
export class UploadSlots {
  private readonly inFlight = new Map<string, number>();

  constructor(readonly maxPerClient: number) {}

  /** Take a slot for the client, or throw TOOMANYREQUESTS; the returned function gives it back (once). */
  acquire(client: string): () => void {
    const held = this.inFlight.get(client) ?? 0;
    if (this.maxPerClient > 0 && held >= this.maxPerClient) {
      throw new RegistryError(
        'TOOMANYREQUESTS',
        `too many uploads in flight from this client (the limit is ${this.maxPerClient}); retry when one has finished`,
        { limit: this.maxPerClient },
      ).withHeaders({ 'Retry-After': '1' });
    }
    this.inFlight.set(client, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(client) ?? 1) - 1;
      if (left <= 0) this.inFlight.delete(client);
      else this.inFlight.set(client, left);
    };
  }

  /** Slots held by a client (for tests and metrics). */
  held(client: string): number {
    return this.inFlight.get(client) ?? 0;
  }
}
