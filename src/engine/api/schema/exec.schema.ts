import type { ExecCreateRequest, ExecStartRequest } from '../../containers/exec/exec.types.js';
import { array, bool, decodeStruct, type Fields, str, strings, uint } from './go-json.js';

/** The exec bodies as moby declares them (types.ExecConfig, types.ExecStartCheck), decoded as Go does. */

/** types.ExecConfig (POST /containers/{id}/exec). */
export const execConfigFields: Fields = {
  User: str,
  Privileged: bool,
  Tty: bool,
  ConsoleSize: array('*[2]uint', uint),
  AttachStdin: bool,
  AttachStderr: bool,
  AttachStdout: bool,
  Detach: bool,
  DetachKeys: str,
  Env: strings,
  WorkingDir: str,
  Cmd: strings,
};

/** types.ExecStartCheck (POST /exec/{id}/start). */
export const execStartFields: Fields = {
  Detach: bool,
  Tty: bool,
  ConsoleSize: array('*[2]uint', uint),
};

/** An exec create body, decoded as dockerd's json.Decoder fills types.ExecConfig. */
export function decodeExecCreateJson(body: Record<string, unknown>): ExecCreateRequest {
  return decodeStruct(body, execConfigFields, 'ExecConfig', []) as ExecCreateRequest;
}

/** An exec start body, decoded as dockerd's json.Decoder fills types.ExecStartCheck. */
export function decodeExecStartJson(body: Record<string, unknown>): ExecStartRequest {
  return decodeStruct(body, execStartFields, 'ExecStartCheck', []) as ExecStartRequest;
}
