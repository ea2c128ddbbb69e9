import type { ExchangeResult } from './lib/exchange.js';
import type { WireRequest } from './lib/wire.js';

/**
 * Defects the fuzzers found in code another piece of work owns, while that work is under way.
 * Each says who fixes it, what shows it, and how a run treats it meanwhile:
 * - `avoid`: the generator's requests of that shape are not sent (the defect would end the server
 *   or the run); counted in the summary as left out;
 * - `symptom`: a failure with that look is counted as known instead of failing the run.
 * `--known` sends and fails them all the same. Each also has a reproducer in the corpus
 * (corpus.ts), run as a TODO test until the entry here is deleted. Delete an entry once its fix
 * is merged (the corpus case then has to pass).
 */

export interface KnownDefect {
  id: string;
  server: 'engine' | 'registry';
  /** Who fixes it (the piece of work, then the file). */
  owner: string;
  what: string;
  avoid?: (req: WireRequest) => boolean;
  symptom?: (reason: string, req: WireRequest, result: ExchangeResult) => boolean;
}

export const KNOWN_DEFECTS: KnownDefect[] = [];

export function knownFor(server: 'engine' | 'registry'): KnownDefect[] {
  return KNOWN_DEFECTS.filter((k) => k.server === server);
}
