import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import type { HostConfig } from '../../../common/docker-types.js';
import { conflict, errorMessage, invalidParameter, isKind, notFound } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import type { Container } from '../core/container.js';
import type { LinkTarget } from '../core/ports.js';
import type { LinkRecord } from '../core/record.types.js';
import type { ContainerSet } from '../core/set.js';
import type { ContainerStore } from '../core/store.js';
import { type HostsEntry, rewriteInPlace, updateHostsAddress } from './files.js';
import { linkEnv, linkHostNames, linkName, parseLink } from './links.js';

/**
 * Legacy links (`--link name:alias`) on the default bridge, as dockerd's registerLinks and its
 * link names: resolved at create, checked at start (their /etc/hosts entries and variables), the
 * names `/parent/alias` kept in the name registry, followed on rename and removal.
 */
export class LegacyLinks {
  constructor(
    private readonly set: ContainerSet,
    private readonly store: ContainerStore,
    /** Whether a container is on the default bridge (only there do links work). */
    private readonly onBridge: (c: Container) => boolean,
    private readonly log: Logger,
  ) {}

  /**
   * Create: HostConfig.Links resolved as dockerd's registerLinks does (400 for an unknown target;
   * a target in another container's network namespace means that container; none on the host's
   * network). Links on a user-defined network are not legacy links (none exist here yet).
   */
  resolve(hc: HostConfig): LinkTarget[] {
    const out: LinkTarget[] = [];
    for (const value of hc.Links ?? []) {
      const { name, alias } = parseLink(value);
      let target = this.lookup(name, 'could not get container for');
      for (let hops = 0; target.hostConfig.NetworkMode?.startsWith('container:') && hops < 16; hops++) {
        target = this.lookup(
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

  private lookup(name: string, prefix: string): Container {
    if (name === '') throw invalidParameter(`${prefix} : invalid name or ID supplied: ""`);
    try {
      return this.set.get(name);
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
  kept(parentName: string, links: LinkTarget[]): LinkRecord[] {
    const seen = new Set<string>();
    const out: LinkRecord[] = [];
    for (const l of links) {
      const full = linkName(parentName, l.alias);
      if (full === parentName || seen.has(full) || this.set.names.nameTaken(full)) continue;
      seen.add(full);
      out.push({ alias: l.alias, id: l.id, name: l.name });
    }
    return out;
  }

  /** Reserve a container's link names (create, and engine start). */
  register(c: Container): void {
    for (const l of c.record.Links ?? []) {
      const full = linkName(c.name, l.alias);
      if (!this.set.find(l.id) || this.set.names.nameTaken(full)) continue;
      this.set.names.reserveLink(full, l.id);
    }
  }

  /** A removed parent's link names go (the linked containers' own names are not touched). */
  release(c: Container): void {
    for (const l of c.record.Links ?? []) {
      const full = linkName(c.name, l.alias);
      if (this.set.names.nameTaken(full) && this.set.tryResolve(full) === l.id) this.set.names.release(full);
    }
  }

  /** A renamed parent's link names follow it (`/old/alias` becomes `/new/alias`). */
  renamed(c: Container, oldName: string): void {
    for (const l of c.record.Links ?? []) {
      const from = linkName(oldName, l.alias);
      if (this.set.tryResolve(from) !== l.id) continue;
      this.set.names.release(from);
      const to = linkName(c.name, l.alias);
      if (!this.set.names.nameTaken(to)) this.set.names.reserveLink(to, l.id);
    }
  }

  /** inspect's HostConfig.Links: `/target:/parent/alias` (null without links), as dockerd shows them. */
  view(c: Container): string[] | null {
    const links = c.record.Links ?? [];
    if (!links.length) return null;
    return links.map((l) => `${this.set.find(l.id)?.name ?? l.name}:${linkName(c.name, l.alias)}`);
  }

  /** List's Names: the container's name and the link names pointing to it, sorted. */
  names(c: Container): string[] {
    const links = this.set.names.linkNamesOf(c.id);
    return links.length ? [c.name, ...links].sort() : [c.name];
  }

  /**
   * Start: each link's target must be on the default bridge and running (dockerd's messages); the
   * parent gets its /etc/hosts entry and variables.
   */
  forStart(c: Container): { hosts: HostsEntry[]; env: string[] } {
    const hosts: HostsEntry[] = [];
    const env: string[] = [];
    for (const l of c.record.Links ?? []) {
      const target = this.set.find(l.id);
      const full = linkName(c.name, l.alias);
      const name = target?.name ?? l.name;
      if (target && !this.onBridge(target)) {
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

  /** The /etc/hosts entries of a running parent's links whose targets still run. */
  runningHosts(c: Container): HostsEntry[] {
    const out: HostsEntry[] = [];
    for (const l of c.record.Links ?? []) {
      const t = this.set.find(l.id);
      const ep = t?.record.Endpoint;
      if (!t?.isRunningProcess || ep?.network !== 'bridge') continue;
      out.push({ ip: ep.ipAddress, names: linkHostNames(l.alias, t.record.Config.Hostname ?? '', t.name) });
    }
    return out;
  }

  /** A linked container started (again): running containers linking to it get its new address. */
  async targetStarted(target: Container, ip: string): Promise<void> {
    for (const p of this.set.values()) {
      if (p === target || !p.isRunningProcess || p.record.Endpoint?.network !== 'bridge') continue;
      const aliases = (p.record.Links ?? []).filter((l) => l.id === target.id).map((l) => l.alias);
      if (!aliases.length) continue;
      try {
        let content = await readFile(p.record.HostsPath, 'utf8');
        for (const alias of aliases) content = updateHostsAddress(content, alias, ip);
        await rewriteInPlace(p.record.HostsPath, content);
      } catch (err) {
        this.log.warn('cannot update the hosts file of a linking container', {
          id: p.id,
          error: errorMessage(err),
        });
      }
    }
  }

  /**
   * `DELETE /containers/{parent}/{alias}?link=1`: remove one link, as dockerd's rmLink. The
   * removal is also kept in the parent's HostConfig; `rewriteHosts` writes a running parent's
   * /etc/hosts again without it.
   */
  async remove(idOrName: string, rewriteHosts: (parent: Container) => Promise<void>): Promise<void> {
    const name = idOrName.startsWith('/') ? idOrName : `/${idOrName}`;
    this.set.names.resolve(idOrName); // 404 when nothing has that name
    const parentName = posix.dirname(name);
    if (parentName === '/')
      throw invalidParameter('Conflict, cannot remove the default link name of the container');
    const parentId = this.set.tryResolve(parentName);
    const parent = parentId ? this.set.find(parentId) : undefined;
    if (!parent) throw notFound(`Cannot get parent ${parentName} for link name ${name}`);
    const alias = posix.basename(name);
    await parent.lock.run(async () => {
      this.set.names.release(name);
      parent.record.Links = (parent.record.Links ?? []).filter(
        (l) => linkName(parent.name, l.alias) !== name,
      );
      if (!parent.record.Links.length) delete parent.record.Links;
      const given = (parent.hostConfig.Links ?? []).filter((v) => {
        try {
          return linkName(parent.name, parseLink(v).alias) !== linkName(parent.name, alias);
        } catch {
          return true;
        }
      });
      parent.hostConfig.Links = given.length ? given : null;
      await this.store.persist(parent, true);
      await rewriteHosts(parent);
    });
  }
}
