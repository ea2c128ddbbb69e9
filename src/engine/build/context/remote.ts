import { mkdir, stat } from 'node:fs/promises';
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

/**
 * The body of an http(s) URL, read as it arrives, at most `limit` bytes (413 beyond), aborted
 * with `signal`.
 */
export async function* fetchBounded(
  url: string,
  signal: AbortSignal,
  limit: number,
  onResponse?: (res: IncomingMessage) => void,
): AsyncGenerator<Buffer> {
  const { body, length } = await openUrl(url, signal).catch((err) => {
    signal.throwIfAborted();
    throw err;
  });
  onResponse?.(body);
  try {
    if (length !== undefined && length > limit) {
      throw new BerthError('TooLarge', `${url}: ${length} bytes is more than the limit of ${limit} bytes`);
    }
    let size = 0;
    for await (const chunk of body) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new BerthError('TooLarge', `${url}: more than the limit of ${limit} bytes`);
      yield chunk as Buffer;
    }
  } catch (err) {
    signal.throwIfAborted();
    if (isBerthError(err)) throw err;
    throw invalidParameter(`error downloading remote context ${url}: ${(err as Error).message}`);
  } finally {
    body.destroy();
  }
}

/**
 * Clone a git `remote` (`url#ref:subdir`) into `dir/repo` with `git clone --depth 1` and return
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
  const args = ['clone', '--depth', '1', '--recurse-submodules', '--shallow-submodules'];
  if (ref) args.push('--branch', ref);
  args.push('--', url, repo);
  const { code, stderr } = await host.git(args, dir, signal);
  signal.throwIfAborted();
  if (code === undefined) {
    throw invalidParameter(`unable to find 'git': exec: "git": executable file not found in $PATH`);
  }
  if (code !== 0) {
    throw invalidParameter(
      `unable to 'git clone' to temporary context directory: error fetching: ${stderr || `git exited with status ${code}`}`,
    );
  }
  if (!subdir) return repo;
  const root = await resolveInRoot(repo, subdir);
  const st = await stat(root).catch(() => undefined);
  if (!st?.isDirectory()) throw invalidParameter(`subdir not found: ${subdir}`);
  return root;
}
