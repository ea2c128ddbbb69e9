import { readFileSync } from 'node:fs';
import type { PortProto } from './port-spec.js';

/** The kernel's ephemeral range, as dockerd's portallocator reads it (its own default otherwise). */
export function kernelPortRange(path = '/proc/sys/net/ipv4/ip_local_port_range'): {
  start: number;
  end: number;
} {
  try {
    const [a, b] = readFileSync(path, 'utf8').trim().split(/\s+/).map(Number);
    if (a && b && a > 0 && b >= a && b <= 65535) return { start: a, end: b };
  } catch {
    // not Linux, or /proc unreadable: dockerd's fallback
  }
  return { start: 49153, end: 65535 };
}

/**
 * The host ports this engine handed out, by protocol and host address, as dockerd's portallocator
 * keeps them: a port given twice is "already allocated"; ephemeral ports are taken in turn from
 * the range (the next after the last one given, wrapping), so that a port released is not handed
 * out again at once. Whether the host lets the engine bind the port is the binder's to find out.
 */
export class PortAllocator {
  private readonly taken = new Map<string, Set<number>>();
  private readonly last = new Map<string, number>();

  constructor(readonly range: { start: number; end: number } = kernelPortRange()) {}

  private set(proto: PortProto, ip: string): Set<number> {
    const key = `${proto}/${ip}`;
    let s = this.taken.get(key);
    if (!s) {
      s = new Set();
      this.taken.set(key, s);
    }
    return s;
  }

  isTaken(proto: PortProto, ip: string, port: number): boolean {
    return this.set(proto, ip).has(port);
  }

  /** Take `port` (a restored binding, or a fixed one checked with isTaken). */
  take(proto: PortProto, ip: string, port: number): void {
    this.set(proto, ip).add(port);
  }

  release(proto: PortProto, ip: string, port: number): void {
    this.set(proto, ip).delete(port);
  }

  /**
   * The next free port of `start..end` (0..0: the ephemeral range) after the last one handed out
   * there, skipping `skip`; undefined when all are taken. Does not take it.
   */
  next(
    proto: PortProto,
    ip: string,
    start: number,
    end: number,
    skip: ReadonlySet<number> = new Set(),
  ): number | undefined {
    const ephemeral = start === 0;
    const lo = ephemeral ? this.range.start : start;
    const hi = ephemeral ? this.range.end : end;
    const key = `${proto}/${ip}/${lo}-${hi}`;
    const taken = this.set(proto, ip);
    const size = hi - lo + 1;
    const from = this.last.get(key);
    for (let i = 0; i < size; i++) {
      // a fixed range is tried from its start (dockerd: the first free port of the range)
      const port = ephemeral && from !== undefined ? lo + ((from - lo + 1 + i) % size) : lo + i;
      if (!taken.has(port) && !skip.has(port)) {
        if (ephemeral) this.last.set(key, port);
        return port;
      }
    }
    return undefined;
  }
}
