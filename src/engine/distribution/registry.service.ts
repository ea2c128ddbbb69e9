import type { RegistryClient } from './client.js';
import { type DistributionInspect, inspectDistribution } from './inspect.js';
import { type LoginResult, login } from './login.js';
import { type SearchFilters, type SearchResult, searchRegistries } from './search.js';
import type { AuthConfig } from './types.js';

/**
 * What the engine asks of registries beyond pull and push: docker login (POST /auth), search
 * (GET /images/search, from the registries' catalogs) and GET /distribution/{name}/json.
 */
export class RegistryService {
  constructor(
    private readonly client: RegistryClient,
    /** Read at each use: a reload may change them. */
    private readonly config: () => { mirrors: string[]; insecureRegistries: string[] },
  ) {}

  login(creds: AuthConfig, signal?: AbortSignal): Promise<LoginResult> {
    return login(this.client, creds, signal);
  }

  search(opts: {
    term: string;
    limit: number;
    filters: SearchFilters;
    creds: AuthConfig;
    signal?: AbortSignal;
  }): Promise<SearchResult[]> {
    return searchRegistries(this.client, { ...opts, ...this.config() });
  }

  inspect(
    target: { domain: string; path: string; familiar: string; reference: string },
    creds: AuthConfig,
    signal?: AbortSignal,
  ): Promise<DistributionInspect> {
    return inspectDistribution(this.client, target, creds, signal);
  }
}
