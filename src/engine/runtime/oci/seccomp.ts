import { arch, release } from 'node:os';
import { invalidParameter } from '../../../common/errors.js';
import type { OciSeccomp, OciSyscall } from './spec.types.js';

/** A seccomp profile in moby's format (what `--security-opt seccomp=<file>` sends). */
export interface SeccompProfile {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures?: string[];
  archMap?: { architecture: string; subArchitectures: string[] }[];
  syscalls?: SeccompSyscall[];
}

interface SeccompSyscall {
  name?: string;
  names?: string[];
  action: string;
  errnoRet?: number;
  args?: { index: number; value: number; valueTwo?: number; op: string }[] | null;
  includes?: SeccompFilter;
  excludes?: SeccompFilter;
}

interface SeccompFilter {
  caps?: string[];
  arches?: string[];
  minKernel?: string;
}

/** Node's process.arch -> libseccomp's native name and the OCI arch. */
const archs: Record<string, [string, string]> = {
  x64: ['amd64', 'SCMP_ARCH_X86_64'],
  ia32: ['x86', 'SCMP_ARCH_X86'],
  arm64: ['arm64', 'SCMP_ARCH_AARCH64'],
  arm: ['arm', 'SCMP_ARCH_ARM'],
  s390x: ['s390x', 'SCMP_ARCH_S390X'],
  ppc64: ['ppc64le', 'SCMP_ARCH_PPC64LE'],
  mips64el: ['mipsel64', 'SCMP_ARCH_MIPSEL64'],
};

function kernelAtLeast(kernel: string, min: string): boolean {
  const v = (s: string) =>
    s
      .split(/[.-]/)
      .slice(0, 2)
      .map((x) => Number.parseInt(x, 10) || 0);
  const [a = 0, b = 0] = v(kernel);
  const [c = 0, d = 0] = v(min);
  return a > c || (a === c && b >= d);
}

/**
 * linux.seccomp for a container from a moby-format profile (moby's setupSeccomp): blocks are kept
 * by architecture, the container's bounding capabilities and the kernel version.
 */
export function seccompForContainer(
  profile: SeccompProfile,
  boundingCaps: readonly string[],
  env: { arch?: string; kernel?: string } = {},
): OciSeccomp | null {
  if (!profile.defaultAction && (profile.syscalls ?? []).length === 0) return null;
  if (profile.architectures?.length && profile.archMap?.length) {
    throw invalidParameter(
      "'architectures' and 'archMap' were specified in the seccomp profile, use either 'architectures' or 'archMap'",
    );
  }
  const [native, ociArch] = archs[env.arch ?? arch()] ?? ['', ''];
  const kernel = env.kernel ?? release();
  const out: OciSeccomp = { defaultAction: profile.defaultAction };
  if (profile.defaultErrnoRet !== undefined) out.defaultErrnoRet = profile.defaultErrnoRet;
  const architectures = [...(profile.architectures ?? [])];
  const m = profile.archMap?.find((a) => a.architecture === ociArch);
  if (m) architectures.push(m.architecture, ...m.subArchitectures);
  if (architectures.length > 0) out.architectures = architectures;
  const caps = new Set(boundingCaps);
  const syscalls: OciSyscall[] = [];
  for (const call of profile.syscalls ?? []) {
    const ex = call.excludes ?? {};
    const inc = call.includes ?? {};
    if (ex.arches?.includes(native)) continue;
    if (ex.caps?.some((c) => caps.has(c))) continue;
    if (ex.minKernel && kernelAtLeast(kernel, ex.minKernel)) continue;
    if (inc.arches?.length && !inc.arches.includes(native)) continue;
    if (inc.caps?.length && !inc.caps.every((c) => caps.has(c))) continue;
    if (inc.minKernel && !kernelAtLeast(kernel, inc.minKernel)) continue;
    if (call.name && call.names?.length) {
      throw invalidParameter(
        "'name' and 'names' were specified in the seccomp profile, use either 'name' or 'names'",
      );
    }
    const s: OciSyscall = {
      names: call.name ? [call.name] : (call.names ?? []),
      action: call.action,
    };
    if (call.errnoRet !== undefined) s.errnoRet = call.errnoRet;
    if (call.args?.length) s.args = call.args;
    syscalls.push(s);
  }
  if (syscalls.length > 0) out.syscalls = syscalls;
  return out;
}

const forProfile = new WeakMap<SeccompProfile, Map<string, OciSeccomp | null>>();

/**
 * seccompForContainer for a profile kept for the engine's life (Docker's default, the daemon's
 * `--seccomp-profile`): the result for a set of capabilities is made once and shared by every
 * spec that asks (the same object, so that its JSON text and its compiled program are made once
 * too: specToJson, SeccompBpfCache). Nobody changes a spec's seccomp section.
 */
export function sharedSeccompForContainer(
  profile: SeccompProfile,
  boundingCaps: readonly string[],
): OciSeccomp | null {
  let byCaps = forProfile.get(profile);
  if (!byCaps) {
    byCaps = new Map();
    forProfile.set(profile, byCaps);
  }
  const key = [...boundingCaps].sort().join(',');
  let out = byCaps.get(key);
  if (out === undefined) {
    out = seccompForContainer(profile, boundingCaps);
    byCaps.set(key, out);
  }
  return out;
}

/** Parse the JSON of a custom profile (SecurityOpt `seccomp=<json>`). */
export function parseSeccompProfile(json: string): SeccompProfile {
  try {
    const p = JSON.parse(json) as SeccompProfile;
    if (typeof p !== 'object' || p === null) throw new Error('not an object');
    return p;
  } catch (err) {
    throw invalidParameter(
      `Decoding seccomp profile failed: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}
