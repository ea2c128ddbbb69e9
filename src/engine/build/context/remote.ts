import { mkdir, rm, stat } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { BerthError, invalidParameter, isBerthError } from '../../../common/errors.js';
import { openUrl } from '../../images/url-source.js';
import { resolveInRoot } from '../../runtime/oci/rootfs-path.js';
import type { ContextHost } from './context.host.js';

/** A `remote` that names a git repository (moby's urlutil.IsGitURL). */
export function isGitUrl(remote: string): boolean {
  if (/^https?:\/\//.test(remote) && /\.git(?:#.+)?$/.test(remote)) return true;
  return ['git://', 'github.com/', 'git@'].some((p) => remote.startsWith(p));
}

/** A `remote` that is an http(s) URL (anything else, not git, dockerd does not recognise). */
export function isHttpUrl(remote: string): boolean {
  return /^https?:\/\//.test(remote);
}

export interface FetchOptions {
  signal: AbortSignal;
  /** At most this many bytes (413 beyond). */
  limit: number;
  /** Told the response once its headers are in. */
  onResponse?(res: IncomingMessage): void;
  /** Told the bytes received so far, as they come. */
  onProgress?(bytes: number): void;
  /** Put before the message of a failed request (dockerd's `error downloading remote context <url>: `). */
  errorPrefix?: string;
}

/** The body of an http(s) URL, read as it arrives (bounded, abortable). */
export async function* fetchBounded(url: string, o: FetchOptions): AsyncGenerator<Buffer> {
  const { signal, limit } = o;
  const prefix = o.errorPrefix ?? '';
  const { body, length } = await openUrl(url, signal).catch((err) => {
    signal.throwIfAborted();
    throw isBerthError(err) ? new BerthError(err.kind, `${prefix}${err.message}`) : err;
  });
  o.onResponse?.(body);
  try {
    if (length !== undefined && length > limit) {
      throw new BerthError('TooLarge', `${url}: ${length} bytes is more than the limit of ${limit} bytes`);
    }
    let size = 0;
    for await (const chunk of body) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new BerthError('TooLarge', `${url}: more than the limit of ${limit} bytes`);
      o.onProgress?.(size);
      yield chunk as Buffer;
    }
  } catch (err) {
    signal.throwIfAborted();
    if (isBerthError(err)) throw err;
    throw invalidParameter(`${prefix}${(err as Error).message}`);
  } finally {
    body.destroy();
  }
}

/**
 * Clone a git `remote` (`url#ref:subdir`) into `dir/repo` with `git clone --depth 1` (a full
 * clone from a server without shallow fetches) and return
 * the context's directory in it (the subdirectory when named). No git, an unreachable repository
 * or a missing subdirectory is a 400.
 */
export async function cloneGitContext(
  remote: string,
  dir: string,
  host: ContextHost,
  signal: AbortSignal,
): Promise<string> {
  let url = remote;
  let fragment = '';
  const hash = url.indexOf('#');
  if (hash >= 0) {
    fragment = url.slice(hash + 1);
    url = url.slice(0, hash);
  }
  if (url.startsWith('github.com/')) url = `https://${url}`;
  const [ref, subdir] = fragment.split(':', 2) as [string, string | undefined];
  if (url.startsWith('-') || ref.startsWith('-'))
    throw invalidParameter(`invalid git URL ${JSON.stringify(remote)}`);
  const repo = join(dir, 'repo');
  await mkdir(dir, { recursive: true });
  const clone = (shallow: boolean) => {
    const args = ['clone', '--quiet', '--recurse-submodules'];
    if (shallow) args.push('--depth', '1', '--shallow-submodules');
    if (ref) args.push('--branch', ref);
    args.push('--', url, repo);
    return host.git(args, dir, signal);
  };
  let { code, stderr } = await clone(true);
  // a dumb http server has no shallow fetch (dockerd probes for a smart one first)
  if (code !== 0 && code !== undefined && /shallow/.test(stderr)) {
    await rm(repo, { recursive: true, force: true });
    ({ code, stderr } = await clone(false));
  }
  signal.throwIfAborted();
  if (code === undefined) {
    throw invalidParameter(`unable to find 'git': exec: "git": executable file not found in $PATH`);
  }
  if (code !== 0) {
    throw invalidParameter(`error fetching: ${stderr}: exit status ${code}`);
  }
  if (!subdir) return repo;
  const root = await resolveInRoot(repo, subdir);
  const st = await stat(root).catch(() => undefined);
  if (!st?.isDirectory()) throw invalidParameter(`stat ${subdir}: no such file or directory`);
  return root;
}
