/**
 * A map with its keys in the order Go's encoding/json writes a map's: sorted (dockerd's Labels,
 * ExposedPorts, Volumes, Sysctls... come out so, whatever order they were given in). Absent
 * stays absent; a map already in order is returned as it is.
 */
export function sortedMap<T>(m: Record<string, T>): Record<string, T>;
export function sortedMap<T>(m: Record<string, T> | null | undefined): Record<string, T> | null | undefined;
export function sortedMap<T>(m: Record<string, T> | null | undefined): Record<string, T> | null | undefined {
  if (!m) return m;
  const keys = Object.keys(m);
  let inOrder = true;
  for (let i = 1; i < keys.length && inOrder; i++) inOrder = (keys[i - 1] as string) < (keys[i] as string);
  if (inOrder) return m;
  const out: Record<string, T> = {};
  for (const k of keys.sort()) out[k] = m[k] as T;
  return out;
}
