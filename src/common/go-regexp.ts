import { RE2JS } from 're2js';
import { errorMessage, invalidParameter } from './errors.js';

/**
 * Regular expressions from users (filters, log options, image reference patterns) compiled as Go
 * compiles them: RE2 syntax (`(?P<name>`, `(?i)` flags) and linear-time matching. JavaScript's
 * backtracking RegExp would let one request stall the engine (`([0-9a-f]+)+x` against an ID).
 */
export interface GoRegExp {
  /** Whether the expression matches anywhere in `text` (Go's MatchString). */
  test(text: string): boolean;
}

/** Compile `source`; a syntax error throws with RE2's message. */
export function compileGoRegExp(source: string): GoRegExp {
  const re = RE2JS.compile(source);
  return { test: (text) => re.test(text) };
}

/** A user's Go regular expression (a log option...); a bad one is a 400 with RE2's words (Go's). */
export function userGoRegExp(source: string): GoRegExp {
  try {
    return compileGoRegExp(source);
  } catch (err) {
    // RE2's message is Go's: "error parsing regexp: missing closing ]: `[`"
    throw invalidParameter(errorMessage(err));
  }
}

/**
 * dockerd's filters.Match for one value: the pattern as an unanchored regular expression, or,
 * when it is not a valid one, as a plain substring.
 */
export function filterMatch(pattern: string, value: string): boolean {
  let re: GoRegExp;
  try {
    re = compileGoRegExp(pattern);
  } catch {
    return value.includes(pattern);
  }
  return re.test(value);
}
