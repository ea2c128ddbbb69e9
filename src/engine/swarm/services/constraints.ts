/**
 * Placement constraints as swarmkit parses them (manager/constraint): `key == value` or
 * `key != value`, the key `[a-z_][a-z0-9-_.]+` and the value free of other operators, case
 * insensitive. A bad one is refused at create and update with swarmkit's words (dockerd answers
 * those with 500; berth with 400).
 */

export interface Constraint {
  key: string;
  op: '==' | '!=';
  value: string;
}

const OPERATORS = ['==', '!='] as const;
const KEY = /^[a-z_][a-z0-9\-_.]+$/i;
const VALUE = /^[a-z0-9:\-_\s.*()?+[\]\\^$|/]+$/i;

/** Parses the expressions, or throws an Error with swarmkit's message. */
export function parseConstraints(exprs: readonly string[]): Constraint[] {
  return exprs.map((e) => {
    for (const op of OPERATORS) {
      const at = e.indexOf(op);
      if (at < 0) continue;
      const key = e.slice(0, at).trim();
      if (!KEY.test(key)) throw new Error(`key '${key}' is invalid`);
      const value = e.slice(at + op.length).trim();
      if (!VALUE.test(value)) throw new Error(`value '${value}' is invalid`);
      return { key, op, value };
    }
    throw new Error(`constraint expected one operator from ${OPERATORS.join(', ')}`);
  });
}
