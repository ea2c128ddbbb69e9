import type { ContainerConfig, ImageConfigFile } from '../../common/docker-types.js';
import { sortedMap } from '../../common/sorted-map.js';

/**
 * A ContainerConfig as Go's encoding/json writes moby's container.Config: every field in struct
 * order, `null` for empty slices and maps, and the `omitempty` ones (ExposedPorts, Healthcheck,
 * ArgsEscaped, NetworkDisabled, MacAddress, StopSignal, StopTimeout, Shell) left out when empty.
 */
export function orderedContainerConfig(c: ContainerConfig | null | undefined): Record<string, unknown> {
  const src = c ?? {};
  const out: Record<string, unknown> = {
    Hostname: src.Hostname ?? '',
    Domainname: src.Domainname ?? '',
    User: src.User ?? '',
    AttachStdin: src.AttachStdin ?? false,
    AttachStdout: src.AttachStdout ?? false,
    AttachStderr: src.AttachStderr ?? false,
  };
  if (src.ExposedPorts && Object.keys(src.ExposedPorts).length)
    out.ExposedPorts = sortedMap(src.ExposedPorts);
  out.Tty = src.Tty ?? false;
  out.OpenStdin = src.OpenStdin ?? false;
  out.StdinOnce = src.StdinOnce ?? false;
  out.Env = src.Env ?? null;
  out.Cmd = src.Cmd ?? null;
  if (src.Healthcheck) out.Healthcheck = src.Healthcheck;
  if (src.ArgsEscaped) out.ArgsEscaped = true;
  out.Image = src.Image ?? '';
  out.Volumes = sortedMap(src.Volumes) ?? null;
  out.WorkingDir = src.WorkingDir ?? '';
  out.Entrypoint = src.Entrypoint ?? null;
  if (src.NetworkDisabled) out.NetworkDisabled = true;
  if (src.MacAddress) out.MacAddress = src.MacAddress;
  out.OnBuild = src.OnBuild ?? null;
  out.Labels = sortedMap(src.Labels) ?? null;
  if (src.StopSignal) out.StopSignal = src.StopSignal;
  if (src.StopTimeout !== undefined && src.StopTimeout !== null) out.StopTimeout = src.StopTimeout;
  if (src.Shell?.length) out.Shell = src.Shell;
  return out;
}

/**
 * The bytes of an image config, as moby's image.Image.MarshalJSON writes them: top-level keys
 * sorted. The image ID is the sha256 of these bytes.
 */
export function serializeImageConfig(config: ImageConfigFile): string {
  const entries = Object.entries(config).filter(([, v]) => v !== undefined);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(Object.fromEntries(entries));
}

/** Unix seconds of an RFC 3339 timestamp (0 when absent or unparseable). */
export function unixSeconds(ts: string | undefined): number {
  if (!ts) return 0;
  const ms = Date.parse(ts);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : 0;
}

/** Go's zero time, as inspect prints an unset LastTagTime. */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

/** The host's architecture in OCI terms. */
export function hostArchitecture(): string {
  const map: Record<string, string> = {
    x64: 'amd64',
    arm64: 'arm64',
    arm: 'arm',
    ia32: '386',
    ppc64: 'ppc64le',
    s390x: 's390x',
    riscv64: 'riscv64',
  };
  return map[process.arch] ?? process.arch;
}
