import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { configFromObject, type RegistryConfig } from '../../src/registry/config.js';
import { startRegistry } from '../../src/registry/index.js';
import type { RegistryHooks, RunningRegistry } from '../../src/registry/server.js';
import { requireTool, runCommand } from './process.js';

export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
export const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
export const DOCKER_LIST = 'application/vnd.docker.distribution.manifest.list.v2+json';
export const ALL_MANIFEST_TYPES = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST].join(', ');

export function sha256(data: string | Uint8Array): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export async function tempDir(prefix = 'berth-reg-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export interface TestRegistry extends RunningRegistry {
  root: string;
  config: RegistryConfig;
  /** Stop the server and remove its root (unless keepRoot). */
  stop(keepRoot?: boolean): Promise<void>;
}

/**
 * Start a registry in-process on 127.0.0.1, port 0, over a temporary root (or the given one).
 * `config` is a config.yml-shaped object merged over the defaults (auth sections included).
 */
export async function startTestRegistry(
  config: Record<string, unknown> = {},
  hooks: RegistryHooks = {},
  root?: string,
): Promise<TestRegistry> {
  const dir = root ?? (await tempDir());
  const raw = structuredClone(config) as Record<string, Record<string, unknown>>;
  raw.storage = { delete: { enabled: true }, ...(raw.storage ?? {}), filesystem: { rootdirectory: dir } };
  raw.http = { addr: '127.0.0.1:0', ...(raw.http ?? {}) };
  raw.log = { level: 'error', accesslog: { disabled: true }, ...(raw.log ?? {}) };
  const typed = configFromObject(raw);
  // as `berth registry` starts it: auth, the token server and rate limits from the config too
  const { running } = await startRegistry(typed, hooks);
  return {
    ...running,
    root: dir,
    config: typed,
    async stop(keepRoot = false) {
      await running.close();
      if (!keepRoot) await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface Res {
  status: number;
  headers: Headers;
  body: Buffer;
  json: () => unknown;
  text: () => string;
}

/** One HTTP request with fetch; the body is read whole. */
export async function http(
  method: string,
  url: string,
  options: { headers?: Record<string, string>; body?: Uint8Array | string | ReadableStream } = {},
): Promise<Res> {
  const init: RequestInit & { duplex?: string } = { method, headers: options.headers, redirect: 'manual' };
  if (options.body !== undefined) {
    init.body = options.body as RequestInit['body'];
    if (options.body instanceof ReadableStream) init.duplex = 'half';
  }
  const res = await fetch(url, init);
  const body = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    headers: res.headers,
    body,
    json: () => JSON.parse(body.toString('utf8')),
    text: () => body.toString('utf8'),
  };
}

/** The error codes of a registry error body. */
export function errorCodes(res: Res): string[] {
  const doc = res.json() as { errors?: Array<{ code: string }> };
  return (doc.errors ?? []).map((e) => e.code);
}

/** Push a blob monolithically (POST, then PUT with the data). Returns its digest. */
export async function pushBlob(base: string, name: string, data: Uint8Array | string): Promise<string> {
  const digest = sha256(data);
  const start = await http('POST', `${base}/v2/${name}/blobs/uploads/`);
  if (start.status !== 202) throw new Error(`POST upload: ${start.status} ${start.text()}`);
  const location = new URL(start.headers.get('location') ?? '', base);
  location.searchParams.set('digest', digest);
  const put = await http('PUT', location.toString(), {
    body: data,
    headers: { 'Content-Type': 'application/octet-stream' },
  });
  if (put.status !== 201) throw new Error(`PUT upload: ${put.status} ${put.text()}`);
  return digest;
}

export async function pushManifest(
  base: string,
  name: string,
  reference: string,
  manifest: unknown,
  mediaType: string,
): Promise<Res> {
  const body = typeof manifest === 'string' ? manifest : JSON.stringify(manifest);
  return http('PUT', `${base}/v2/${name}/manifests/${reference}`, {
    body,
    headers: { 'Content-Type': mediaType },
  });
}

/** An OCI image manifest's JSON: a config and one uncompressed tar layer, by digest and size. */
export function ociManifestJson(
  config: { digest: string; size: number },
  layer: { digest: string; size: number },
): string {
  return JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
    layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
  });
}

/** A small image (config + one layer) pushed to a repository; returns its manifest and digest. */
export async function pushImage(
  base: string,
  name: string,
  tag: string,
  options: { mediaType?: string; layer?: Uint8Array | string; extra?: Record<string, unknown> } = {},
): Promise<{
  digest: string;
  manifest: Record<string, unknown>;
  body: string;
  layer: string;
  config: string;
}> {
  const mediaType = options.mediaType ?? OCI_MANIFEST;
  const oci = mediaType === OCI_MANIFEST;
  const layerData = options.layer ?? `layer of ${name}:${tag} ${Math.random()}`;
  const configData = JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    rootfs: { type: 'layers', diff_ids: [] },
  });
  const layer = await pushBlob(base, name, layerData);
  const config = await pushBlob(base, name, configData);
  const manifest: Record<string, unknown> = {
    schemaVersion: 2,
    mediaType,
    config: {
      mediaType: oci
        ? 'application/vnd.oci.image.config.v1+json'
        : 'application/vnd.docker.container.image.v1+json',
      digest: config,
      size: Buffer.byteLength(configData),
    },
    layers: [
      {
        mediaType: oci
          ? 'application/vnd.oci.image.layer.v1.tar+gzip'
          : 'application/vnd.docker.image.rootfs.diff.tar.gzip',
        digest: layer,
        size: Buffer.byteLength(layerData),
      },
    ],
    ...options.extra,
  };
  const body = JSON.stringify(manifest);
  const res = await pushManifest(base, name, tag, body, mediaType);
  if (res.status !== 201) throw new Error(`PUT manifest: ${res.status} ${res.text()}`);
  return { digest: sha256(body), manifest, body, layer, config };
}

/** A gzipped tar of the given files (name → content, mode 0755). */
export async function tarGz(files: Record<string, Uint8Array | string>): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((resolve, reject) => {
    p.on('end', resolve);
    p.on('error', reject);
  });
  for (const [name, content] of Object.entries(files)) {
    await new Promise<void>((resolve, reject) => {
      p.entry({ name, mode: 0o755, mtime: new Date(0) }, Buffer.from(content), (err) =>
        err ? reject(err) : resolve(),
      );
    });
  }
  p.finalize();
  await done;
  return gzipSync(Buffer.concat(chunks));
}

export interface LayoutImage {
  manifestDigest: string;
  manifest: Buffer;
  layerDigest: string;
}

/**
 * Write an OCI image layout with one image per platform (a busybox layer from /bin/busybox plus
 * a marker file) and, for several platforms, an index. `refName` tags the top entry.
 */
export async function buildOciLayout(
  dir: string,
  options: {
    refName?: string;
    platforms?: Array<{ os: string; architecture: string }>;
    marker?: string;
  } = {},
): Promise<{ top: string; images: LayoutImage[] }> {
  const busybox = await readFile('/bin/busybox').catch(() => {
    throw new Error('/bin/busybox is missing: install busybox-static (scripts/install-deps.sh)');
  });
  await mkdir(join(dir, 'blobs', 'sha256'), { recursive: true });
  const put = async (data: Buffer | string): Promise<string> => {
    const d = sha256(data);
    await writeFile(join(dir, 'blobs', 'sha256', d.slice(7)), data);
    return d;
  };
  const platforms = options.platforms ?? [{ os: 'linux', architecture: 'amd64' }];
  const images: LayoutImage[] = [];
  const descriptors: Array<Record<string, unknown>> = [];
  const busyLayer = await tarGz({ 'bin/busybox': busybox });
  const busyDigest = await put(busyLayer);
  const busyDiff = sha256((await import('node:zlib')).gunzipSync(busyLayer));
  for (const platform of platforms) {
    const markerRaw = await tarGz({
      'etc/marker': `${options.marker ?? 'berth'} ${platform.architecture}\n`,
    });
    const markerDigest = await put(markerRaw);
    const markerDiff = sha256((await import('node:zlib')).gunzipSync(markerRaw));
    const config = JSON.stringify({
      architecture: platform.architecture,
      os: platform.os,
      config: { Cmd: ['/bin/busybox', 'sh'] },
      rootfs: { type: 'layers', diff_ids: [busyDiff, markerDiff] },
      history: [{ created_by: 'busybox' }, { created_by: 'marker' }],
    });
    const configDigest = await put(config);
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: {
          mediaType: 'application/vnd.oci.image.config.v1+json',
          digest: configDigest,
          size: config.length,
        },
        layers: [
          {
            mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
            digest: busyDigest,
            size: busyLayer.length,
          },
          {
            mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
            digest: markerDigest,
            size: markerRaw.length,
          },
        ],
      }),
    );
    const manifestDigest = await put(manifest);
    images.push({ manifestDigest, manifest, layerDigest: markerDigest });
    descriptors.push({ mediaType: OCI_MANIFEST, digest: manifestDigest, size: manifest.length, platform });
  }
  let top: Record<string, unknown>;
  let topDigest: string;
  if (platforms.length > 1) {
    const index = Buffer.from(
      JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: descriptors }),
    );
    topDigest = await put(index);
    top = { mediaType: OCI_INDEX, digest: topDigest, size: index.length };
  } else {
    top = { ...descriptors[0] };
    delete top.platform;
    topDigest = images[0]?.manifestDigest ?? '';
  }
  if (options.refName) top.annotations = { 'org.opencontainers.image.ref.name': options.refName };
  await writeFile(join(dir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [top] }));
  await writeFile(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  return { top: topDigest, images };
}

export { requireTool };

/** Run a command; resolves with its output, rejects with stderr on a non-zero exit. */
export async function run(
  cmd: string,
  args: string[],
  timeoutMs = 60_000,
): Promise<{ stdout: string; stderr: string }> {
  const r = await runCommand(cmd, args, { timeoutMs });
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr || r.stdout}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

export async function skopeo(args: string[], timeoutMs = 90_000): Promise<string> {
  return (await run('skopeo', args, timeoutMs)).stdout;
}

/** Wait until an HTTP endpoint answers (bounded). */
export async function waitForHttp(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await fetch(url);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms: ${err}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * Send raw bytes on a fresh loopback connection (`Connection: close` is up to the caller) and
 * read until the server closes or `timeoutMs`; returns the status code (0 if none) and the text.
 */
export async function rawHttp(
  base: string,
  request: string | Buffer,
  timeoutMs = 5_000,
): Promise<{ status: number; text: string }> {
  const { connect } = await import('node:net');
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0), text });
    };
    const timer = setTimeout(done, timeoutMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('close', done);
    socket.on('error', () => {});
    socket.write(request);
  });
}

/** `host:port` of a registry (what the engine's insecure registries and image names use). */
export const registryHost = (r: { url: string }): string => new URL(r.url).host;

/** An X-Registry-Auth header with no credentials. */
export const AUTH_NONE = Buffer.from('{}').toString('base64');

/** The registries a test file starts in-process: started through `start`, all stopped by `stopAll`. */
export class TestRegistries {
  readonly all: TestRegistry[] = [];

  async start(config: Record<string, unknown> = {}): Promise<TestRegistry> {
    const reg = await startTestRegistry(config);
    this.all.push(reg);
    return reg;
  }

  async stopAll(): Promise<void> {
    for (const r of this.all.splice(0)) await r.stop();
  }
}
