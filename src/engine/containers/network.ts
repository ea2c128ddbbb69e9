import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import type { HostConfig } from '../../common/docker-types.js';
import { conflict, errorMessage, invalidParameter, isKind, notFound } from '../../common/errors.js';
import type { Endpoint } from '../network/network.types.js';
import { type Container, type Internals, save } from './container.js';
import { type HostsEntry, hostsContent, rewriteInPlace, updateHostsAddress } from './files.js';
import { type LinkRecord, linkEnv, linkHostNames, linkName, parseLink } from './links.js';

/**
 * A container's networking as the lifecycle sees it: which network a start attaches to, the
 * bridge attachment (a namespace file and CNI, in src/engine/network), the endpoint in the record,
 * connect/disconnect events, and legacy links (names, environment, /etc/hosts entries).
 */

/**
 * `bridge`: a sandbox on the default bridge; `none`/`host`: dockerd's predefined networks;
 * `container`: another container's namespace; `private`: no network layer (loopback only), for
 * an engine without networking and for a container with `NetworkDisabled` (whatever its mode, as
 * dockerd: no network, no /etc/hosts or /etc/resolv.conf of the engine's).
 */
export type NetworkKind = 'bridge' | 'none' | 'host' | 'container' | 'private';

export function networkKind(ix: Internals, c: Container): NetworkKind {
  if (c.record.Config.NetworkDisabled) return 'private';
  const nm = c.hostConfig.NetworkMode || 'default';
  if (nm.startsWith('container:')) return 'container';
  if (!ix.network) return nm === 'host' ? 'host' : 'private';
  if (nm === 'host') return 'host';
  if (nm === 'none') return 'none';
  return ix.network.bridge ? 'bridge' : 'none';
}

/** What the rest of a start needs from the network: the namespace to join, the links' part. */
export interface StartNetworkPlan {
  /** The sandbox's namespace file (bridge); otherwise the caller decides. */
  netns?: string;
  linkHosts: HostsEntry[];
  linkEnv: string[];
}

function macAddressOf(c: Container): string | undefined {
  const eps = c.record.NetworkingConfig.EndpointsConfig;
  const mac = eps?.bridge?.MacAddress || eps?.default?.MacAddress || c.record.Config.MacAddress || '';
  return mac ? mac.replaceAll('-', ':').toLowerCase() : undefined;
}

/**
 * Start, before the spec: the links are checked (their errors are dockerd's), and the bridge
 * attachment begins: the namespace, then CNI, while the rest of the start goes on.
 */
export function beginStartNetwork(ix: Internals, c: Container): StartNetworkPlan {
  c.startingNetwork = undefined;
  if (networkKind(ix, c) !== 'bridge' || !ix.network) return { linkHosts: [], linkEnv: [] };
  const links = resolveStartLinks(ix, c);
  const attach = ix.network.attachBridge({ macAddress: macAddressOf(c) });
  c.startingNetwork = { attach, linkHosts: links.hosts };
  return { netns: attach.sandboxKey, linkHosts: links.hosts, linkEnv: links.env };
}

/** The namespace exists (the runtime joins it when it creates the container). */
export async function startNetworkReady(c: Container): Promise<void> {
  await c.startingNetwork?.attach.ready;
}

/**
 * Before the process runs: the endpoint goes into the record, the container's own address into
 * its /etc/hosts (in place: the runtime already bind-mounted the file), `network connect` is
 * announced (dockerd's order: connect, then start), and containers linking to this one see its
 * address.
 */
export async function finishStartNetwork(ix: Internals, c: Container): Promise<void> {
  const kind = networkKind(ix, c);
  const rec = c.record;
  const network = ix.network;
  if (!network) return;
  if (kind === 'none' || kind === 'host') {
    const ep = network.plainEndpoint(kind);
    rec.Endpoint = ep;
    rec.Sandbox = { ID: ep.sandboxId, Key: '', Network: kind, NetworkID: ep.networkId };
    network.announce('connect', c.id, kind);
    return;
  }
  const starting = c.startingNetwork;
  if (!starting) return;
  const ep = await starting.attach.endpoint;
  c.startingNetwork = undefined;
  rec.Endpoint = ep;
  rec.Sandbox = { ID: ep.sandboxId, Key: ep.sandboxKey, Network: 'bridge', NetworkID: ep.networkId };
  rec.SandboxKey = ep.sandboxKey;
  network.announce('connect', c.id, 'bridge');
  // a failure from here fails the start, which releases the endpoint (the record's now)
  await rewriteInPlace(rec.HostsPath, ownHosts(ix, c, starting.linkHosts, ep.ipAddress));
  await updateLinkingContainers(ix, c, ep.ipAddress);
}

function ownHosts(ix: Internals, c: Container, links: HostsEntry[], ip: string): string {
  return hostsContent({
    extraHosts: c.hostConfig.ExtraHosts ?? [],
    links,
    ip,
    hostname: c.record.Config.Hostname ?? '',
    domainname: c.record.Config.Domainname,
    hostGateway: ix.network?.bridge?.gateway,
  });
}

/** A failed start: undo the attachment (after its CNI calls settled). */
export function abortStartNetwork(ix: Internals, c: Container): void {
  const starting = c.startingNetwork;
  c.startingNetwork = undefined;
  const ep = c.record.Endpoint;
  c.record.Endpoint = undefined;
  const network = ix.network;
  if (!network) return;
  if (ep) {
    void network.release(ep);
    network.announce('disconnect', c.id, ep.network);
  } else if (starting) {
    const settled = starting.attach.endpoint.then(
      () => undefined,
      () => undefined,
    );
    void settled.then(() => network.release(starting.attach));
  }
}

/** At exit, before the exit is saved: the endpoint leaves the record. */
export function takeEndpoint(c: Container): Endpoint | undefined {
  const ep = c.record.Endpoint;
  c.record.Endpoint = undefined;
  return ep;
}

/** After `die`: the sandbox is released in the background and `network disconnect` announced. */
export function releaseEndpoint(ix: Internals, c: Container, ep: Endpoint | undefined): void {
  if (!ep || !ix.network) return;
  void ix.network.release(ep);
  ix.network.announce('disconnect', c.id, ep.network);
}

/** Live restore: a running container keeps its sandbox. */
export function restoreEndpoint(ix: Internals, c: Container): void {
  if (c.record.Endpoint) ix.network?.restore(c.record.Endpoint);
}

// ---- legacy links ----

/**
 * Create: HostConfig.Links resolved as dockerd's registerLinks does (400 for an unknown target;
 * a target in another container's network namespace means that container; none on the host's
 * network). Links on a user-defined network are not legacy links (none exist here yet).
 */
export function resolveLinks(
  ix: Internals,
  hc: HostConfig,
): Array<{ alias: string; id: string; name: string }> {
  const out: Array<{ alias: string; id: string; name: string }> = [];
  for (const value of hc.Links ?? []) {
    const { name, alias } = parseLink(value);
    let target = lookupForLink(ix, name, 'could not get container for');
    for (let hops = 0; target.hostConfig.NetworkMode?.startsWith('container:') && hops < 16; hops++) {
      target = lookupForLink(
        ix,
        target.hostConfig.NetworkMode.slice('container:'.length),
        'Could not get container for',
      );
    }
    if (target.hostConfig.NetworkMode === 'host') {
      throw invalidParameter(
        "conflicting options: host type networking can't be used with links. This would result in undefined behavior",
      );
    }
    out.push({ alias, id: target.id, name: target.name });
  }
  return out;
}

function lookupForLink(ix: Internals, name: string, prefix: string): Container {
  if (name === '') throw invalidParameter(`${prefix} : invalid name or ID supplied: ""`);
  try {
    const c = ix.containers.get(ix.names.resolve(name));
    if (c) return c;
  } catch (err) {
    if (!isKind(err, 'NotFound')) throw err;
  }
  throw invalidParameter(`${prefix} ${name}: No such container: ${name}`);
}

/**
 * The links a new container keeps: one per link name (`/parent/alias`), the first one winning;
 * a name already in use (another link, a container, the parent itself for an empty alias) is
 * dropped, as dockerd ignores it.
 */
export function keptLinks(
  ix: Internals,
  parentName: string,
  links: Array<{ alias: string; id: string; name: string }>,
): LinkRecord[] {
  const seen = new Set<string>();
  const out: LinkRecord[] = [];
  for (const l of links) {
    const full = linkName(parentName, l.alias);
    if (full === parentName || seen.has(full) || ix.names.nameTaken(full)) continue;
    seen.add(full);
    out.push({ alias: l.alias, id: l.id, name: l.name });
  }
  return out;
}

/** Reserve a container's link names (create, and engine start). */
export function registerLinkNames(ix: Internals, c: Container): void {
  for (const l of c.record.Links ?? []) {
    const full = linkName(c.name, l.alias);
    if (!ix.containers.has(l.id) || ix.names.nameTaken(full)) continue;
    ix.names.reserveLink(full, l.id);
  }
}

/** A removed parent's link names go (the linked containers' own names are not touched). */
export function releaseLinkNames(ix: Internals, c: Container): void {
  for (const l of c.record.Links ?? []) {
    const full = linkName(c.name, l.alias);
    if (ix.names.nameTaken(full) && safeResolve(ix, full) === l.id) ix.names.release(full);
  }
}

/** A renamed parent's link names follow it (`/old/alias` becomes `/new/alias`). */
export function renameLinkNames(ix: Internals, c: Container, oldName: string): void {
  for (const l of c.record.Links ?? []) {
    const from = linkName(oldName, l.alias);
    if (safeResolve(ix, from) !== l.id) continue;
    ix.names.release(from);
    const to = linkName(c.name, l.alias);
    if (!ix.names.nameTaken(to)) ix.names.reserveLink(to, l.id);
  }
}

function safeResolve(ix: Internals, name: string): string | undefined {
  try {
    return ix.names.resolve(name);
  } catch {
    return undefined;
  }
}

/** inspect's HostConfig.Links: `/target:/parent/alias` (null without links), as dockerd shows them. */
export function linksView(ix: Internals, c: Container): string[] | null {
  const links = c.record.Links ?? [];
  if (!links.length) return null;
  return links.map((l) => `${ix.containers.get(l.id)?.name ?? l.name}:${linkName(c.name, l.alias)}`);
}

/** List's Names: the container's name and the link names pointing to it, sorted. */
export function namesView(ix: Internals, c: Container): string[] {
  const links = ix.names.linkNamesOf(c.id);
  return links.length ? [c.name, ...links].sort() : [c.name];
}

function belongsToBridge(ix: Internals, c: Container): boolean {
  const nm = c.hostConfig.NetworkMode || 'default';
  return (nm === 'default' || nm === 'bridge') && !c.record.Config.NetworkDisabled && !!ix.network?.bridge;
}

/**
 * Start: each link's target must be on the default bridge and running (dockerd's messages); the
 * parent gets its /etc/hosts entry and variables.
 */
function resolveStartLinks(ix: Internals, c: Container): { hosts: HostsEntry[]; env: string[] } {
  const hosts: HostsEntry[] = [];
  const env: string[] = [];
  for (const l of c.record.Links ?? []) {
    const target = ix.containers.get(l.id);
    const full = linkName(c.name, l.alias);
    const name = target?.name ?? l.name;
    if (target && !belongsToBridge(ix, target)) {
      throw conflict(`Cannot link to ${name}, as it does not belong to the default network`);
    }
    const ep = target?.record.Endpoint;
    if (!target?.isRunningProcess || ep?.network !== 'bridge') {
      throw conflict(`Cannot link to a non running container: ${name} AS ${full}`);
    }
    hosts.push({
      ip: ep.ipAddress,
      names: linkHostNames(l.alias, target.record.Config.Hostname ?? '', target.name),
    });
    env.push(
      ...linkEnv({
        name: full,
        childIp: ep.ipAddress,
        childEnv: target.record.Config.Env ?? [],
        exposedPorts: Object.keys(target.record.Config.ExposedPorts ?? {}),
      }),
    );
  }
  return { hosts, env };
}

/** A linked container started (again): running containers linking to it get its new address. */
async function updateLinkingContainers(ix: Internals, target: Container, ip: string): Promise<void> {
  for (const p of ix.containers.values()) {
    if (p === target || !p.isRunningProcess || p.record.Endpoint?.network !== 'bridge') continue;
    const aliases = (p.record.Links ?? []).filter((l) => l.id === target.id).map((l) => l.alias);
    if (!aliases.length) continue;
    try {
      let content = await readFile(p.record.HostsPath, 'utf8');
      for (const alias of aliases) content = updateHostsAddress(content, alias, ip);
      await rewriteInPlace(p.record.HostsPath, content);
    } catch (err) {
      ix.log.warn('cannot update the hosts file of a linking container', {
        id: p.id,
        error: errorMessage(err),
      });
    }
  }
}

/**
 * `DELETE /containers/{parent}/{alias}?link=1`: remove one link, as dockerd's rmLink (a running
 * parent's /etc/hosts is written again without it). The removal is also kept in its HostConfig.
 */
export async function removeLink(ix: Internals, idOrName: string): Promise<void> {
  const name = idOrName.startsWith('/') ? idOrName : `/${idOrName}`;
  ix.names.resolve(idOrName); // 404 when nothing has that name
  const parentName = posix.dirname(name);
  if (parentName === '/')
    throw invalidParameter('Conflict, cannot remove the default link name of the container');
  const parentId = safeResolve(ix, parentName);
  const parent = parentId ? ix.containers.get(parentId) : undefined;
  if (!parent) throw notFound(`Cannot get parent ${parentName} for link name ${name}`);
  const alias = posix.basename(name);
  await parent.lock.run(async () => {
    ix.names.release(name);
    parent.record.Links = (parent.record.Links ?? []).filter((l) => linkName(parent.name, l.alias) !== name);
    if (!parent.record.Links.length) delete parent.record.Links;
    const given = (parent.hostConfig.Links ?? []).filter((v) => {
      try {
        return linkName(parent.name, parseLink(v).alias) !== linkName(parent.name, alias);
      } catch {
        return true;
      }
    });
    parent.hostConfig.Links = given.length ? given : null;
    await save(ix, parent, true);
    const ep = parent.record.Endpoint;
    if (parent.isRunningProcess && ep?.network === 'bridge') {
      const links = resolveRunningLinkHosts(ix, parent);
      await rewriteInPlace(parent.record.HostsPath, ownHosts(ix, parent, links, ep.ipAddress));
    }
  });
}

/** The /etc/hosts entries of a running parent's links whose targets still run. */
function resolveRunningLinkHosts(ix: Internals, c: Container): HostsEntry[] {
  const out: HostsEntry[] = [];
  for (const l of c.record.Links ?? []) {
    const t = ix.containers.get(l.id);
    const ep = t?.record.Endpoint;
    if (!t?.isRunningProcess || ep?.network !== 'bridge') continue;
    out.push({ ip: ep.ipAddress, names: linkHostNames(l.alias, t.record.Config.Hostname ?? '', t.name) });
  }
  return out;
}
