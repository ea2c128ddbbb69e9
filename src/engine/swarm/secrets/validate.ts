import { invalidParameter } from '../../../common/errors.js';
import type { ObjectKind } from './secrets.types.js';

/** swarmkit's checks of a secret's or config's spec (manager/controlapi), in its words. */

/** swarmkit's `MaxSecretSize` (500 KiB) and `MaxConfigSize` (1000 KiB): data must be smaller. */
export const MAX_SIZE: Record<ObjectKind, number> = { secret: 500 * 1024, config: 1000 * 1024 };

const NAME = /^[a-zA-Z0-9](?:[a-zA-Z0-9-_.]*[a-zA-Z0-9])?$/;

/** dockerd passes swarmkit's gRPC errors on with their code in the message. */
export function rpcInvalid(message: string) {
  return invalidParameter(`rpc error: code = InvalidArgument desc = ${message}`);
}

export function checkName(name: string): void {
  if (name === '') throw rpcInvalid('name must be provided');
  if (name.length > 64 || !NAME.test(name)) {
    throw rpcInvalid(
      'invalid name, only 64 [a-zA-Z0-9-_.] characters allowed, and the start and end character must be [a-zA-Z0-9]',
    );
  }
}

export function checkData(kind: ObjectKind, data: Buffer): void {
  const max = MAX_SIZE[kind];
  if (data.length < 1 || data.length >= max) {
    throw rpcInvalid(`${kind} data must be larger than 0 and less than ${max} bytes`);
  }
}

const BASE64 = /^[A-Za-z0-9+/]$/;

/** Go's encoding/json reading a []byte: standard base64 with padding, or 400 as Go words it. */
export function decodeBase64(text: string): Buffer {
  const body = text.replace(/[\r\n]/g, '');
  for (let i = 0; i < body.length; i++) {
    const c = body.charAt(i);
    if (BASE64.test(c)) continue;
    if (c === '=' && i >= body.length - 2 && i % 4 >= 2 && /^=*$/.test(body.slice(i))) continue;
    throw invalidParameter(`illegal base64 data at input byte ${i}`);
  }
  if (body.length % 4 !== 0) {
    throw invalidParameter(`illegal base64 data at input byte ${body.length - (body.length % 4)}`);
  }
  return Buffer.from(body, 'base64');
}
