import { invalidParameter } from '../../../common/errors.js';
import type { CreateVolumeRequest } from '../../volumes/volumes.types.js';
import { decodeStruct, type Fields, str, stringMap } from './go-json.js';

/** The volume create body as moby declares it (api/types/volume.CreateOptions), decoded as Go does. */

/** volume.VolumeCreateBody (POST /volumes/create). */
export const volumeCreateFields: Fields = {
  Name: str,
  Driver: str,
  DriverOpts: stringMap,
  Labels: stringMap,
};

/** Go's word for a JSON value's kind in its unmarshal errors. */
function goKind(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  return typeof value === 'boolean' ? 'bool' : typeof value;
}

/**
 * A volume create body decoded as Go's encoding/json fills dockerd's VolumeCreateBody: field
 * names match without regard to case (the last one given wins), unknown fields are ignored, null
 * leaves a field (or a map value) empty, and a wrong type is Go's `cannot unmarshal` error.
 */
export function decodeVolumeCreateJson(value: unknown): CreateVolumeRequest {
  if (value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidParameter(
      `json: cannot unmarshal ${goKind(value)} into Go value of type volume.VolumeCreateBody`,
    );
  }
  const decoded = decodeStruct(value as Record<string, unknown>, volumeCreateFields, 'VolumeCreateBody', []);
  // a null field is left unset
  for (const [k, v] of Object.entries(decoded)) if (v === null) delete decoded[k];
  return decoded as CreateVolumeRequest;
}
