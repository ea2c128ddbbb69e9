import { invalidParameter } from '../../../common/errors.js';
import type { ObjectKind, ObjectSpecInput } from '../../swarm/secrets/secrets.types.js';
import { decodeStruct, type Fields, named, str, stringMap, struct } from './go-json.js';

/** The bodies of POST /secrets/create, /configs/create and their updates, decoded as Go does. */

const driver = struct('swarm.Driver', { Name: str, Options: stringMap });

const fields: Record<ObjectKind, Fields> = {
  secret: { Name: str, Labels: stringMap, Data: named('[]uint8'), Driver: driver, Templating: driver },
  config: { Name: str, Labels: stringMap, Data: named('[]uint8'), Templating: driver },
};

export function decodeObjectSpec(kind: ObjectKind, value: unknown): ObjectSpecInput {
  const go = kind === 'secret' ? 'swarm.SecretSpec' : 'swarm.ConfigSpec';
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    const what = Array.isArray(value) ? 'array' : typeof value;
    throw invalidParameter(`json: cannot unmarshal ${what} into Go value of type ${go}`);
  }
  return decodeStruct(
    value as Record<string, unknown>,
    fields[kind],
    kind === 'secret' ? 'SecretSpec' : 'ConfigSpec',
    [],
  ) as ObjectSpecInput;
}
