/** The build context and COPY/ADD (see build.types.ts): the one import point of the executor. */
export { type DownloadedFile, fetchAddUrl } from './add-url.js';
export { checksumSources, inlineChecksum, sourceChecksum } from './checksum.js';
export { resolveChown, resolveChownInRootfs } from './chown.js';
export { type CopyTarDeps, isArchiveFile, makeCopyTar } from './copy-tar.js';
export { type LocalSource, LocalSources } from './local-sources.js';
export { filepathMatch, hasWildcards, PatternMatcher, parseIgnoreFile } from './patterns.js';
export { type ReceiveOptions, receiveContext } from './receive.js';
export { checkCopyDestination, resolveCopySources, type SourceOptions } from './sources.js';
