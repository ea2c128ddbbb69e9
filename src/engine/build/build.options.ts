/** What a build asks for, as plain options (the route reads POST /build's query and headers). */
export interface BuildOptions {
  /** `t`: references to tag the result with (checked before the build starts). */
  tags: string[];
  /** `dockerfile`: a path in the context (or outside it, as the CLI sends it). */
  dockerfile?: string;
  /** `remote`: an http URL of a tarball or a plain Dockerfile, or a git URL. */
  remote?: string;
  /** `q`: only the image ID. */
  quiet: boolean;
  noCache: boolean;
  /** `pull`: always pull base images. */
  pull: boolean;
  /** `rm` (default true): remove intermediate containers after a successful step. */
  rm: boolean;
  /** `forcerm`: remove them even when a step fails. */
  forceRm: boolean;
  /** `buildargs`: a null value means "take it from the engine's environment" (as dockerd). */
  buildArgs: Map<string, string | null>;
  labels: Record<string, string>;
  target?: string;
  networkMode?: string;
  extraHosts: string[];
  shmSize?: number;
  memory?: number;
  memorySwap?: number;
  cpuShares?: number;
  cpuSetCpus?: string;
  cpuSetMems?: string;
  cpuPeriod?: number;
  cpuQuota?: number;
  cgroupParent?: string;
  isolation?: string;
  ulimits?: Array<{ Name: string; Soft: number; Hard: number }>;
  /** `cachefrom`: images whose history may serve as cache. */
  cacheFrom: string[];
  platform?: string;
  /** Experimental: the result as one layer over the first stage's base. */
  squash: boolean;
  /** X-Registry-Config: registry (as the CLI keys it) → the base64 X-Registry-Auth to pull with. */
  registryAuth: Map<string, string>;
}
