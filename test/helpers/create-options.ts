import type { CreateOptions } from '../../src/engine/containers/core/create.js';

/** What a create at the newest API version decides, for tests that call the containers service. */
export const CREATE_OPTIONS: CreateOptions = {
  defaultIpcMode: 'private',
  kernelMemory: false,
  readOnlyNonRecursive: false,
  defaultNetworkIsBridge: false,
};
