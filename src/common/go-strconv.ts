/**
 * Go's strconv.ParseBool: `1 t T TRUE true True` and `0 f F FALSE false False`; undefined for
 * anything else (callers word the error as the Go code they mirror does).
 */
export function goParseBool(value: string): boolean | undefined {
  switch (value) {
    case '1':
    case 't':
    case 'T':
    case 'TRUE':
    case 'true':
    case 'True':
      return true;
    case '0':
    case 'f':
    case 'F':
    case 'FALSE':
    case 'false':
    case 'False':
      return false;
    default:
      return undefined;
  }
}

/** Go's error text for a value strconv.ParseBool refuses. */
export function parseBoolError(value: string): string {
  return `strconv.ParseBool: parsing ${JSON.stringify(value)}: invalid syntax`;
}
