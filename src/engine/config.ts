import { invalidParameter } from '../common/errors.js';
import type { LogLevel } from '../common/log.js';

export interface EngineConfig {
  /** Listen addresses: `unix:///run/berth/berth.sock`, `tcp://127.0.0.1:2375`. */
  hosts: string[];
  dataRoot: string;
  execRoot: string;
  runtime: 'runc' | 'crun';
  logLevel: LogLevel;
  /** Registries reached over plain HTTP (host:port or CIDR); loopback is always insecure. */
  insecureRegistries: string[];
  experimental: boolean;
  /**
   * The default bridge's Linux name (`--bridge`/`-b`, default `berth0`); `none`: no default bridge
   * (containers in the default network mode get loopback only).
   */
  bridge: string;
  /** `--bip`: the default bridge's address and prefix length (else a free default pool). */
  bip?: string;
  /** `--copy-upload-limit`: the largest archive docker cp may upload, in bytes (413 beyond). */
  copyUploadLimit: number;
}

export const defaultEngineConfig: EngineConfig = {
  hosts: ['unix:///run/berth/berth.sock'],
  dataRoot: '/var/lib/berth',
  execRoot: '/run/berth',
  runtime: 'runc',
  logLevel: 'info',
  insecureRegistries: ['127.0.0.0/8'],
  experimental: false,
  bridge: 'berth0',
  copyUploadLimit: 10 * 1024 ** 3,
};

export function parseRuntimeName(value: string): 'runc' | 'crun' {
  if (value === 'runc' || value === 'crun') return value;
  throw invalidParameter(`unknown runtime ${JSON.stringify(value)}: use runc or crun`);
}
