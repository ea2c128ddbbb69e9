import type { ImageResolver } from '../images/images.types.js';
import type { Container } from './core/container.js';
import { filterContainers } from './core/filters.js';
import type { ContainerSnapshots } from './core/ports.js';
import type { ContainerSet } from './core/set.js';
import { inspectView, listItemView, type ViewSource } from './core/views.js';
import type { ContainerInspect, ContainerSummary } from './core/views.types.js';
import type { Execs } from './exec/exec.js';
import type { ContainerNetworks } from './net/endpoints.js';
import type { ListOptions } from './service.types.js';

export interface QueryDeps {
  set: ContainerSet;
  snapshots: ContainerSnapshots;
  images: Pick<ImageResolver, 'get' | 'resolve' | 'list'>;
  net: Pick<ContainerNetworks, 'links' | 'networkId'>;
  execs: Pick<Execs, 'idsOf'>;
}

/**
 * docker ps and docker inspect: the core's views of a container with what the rooms know of it
 * (links, exec instances, the writable layer's paths and size).
 */
export class ContainerQueries {
  constructor(private readonly d: QueryDeps) {}

  private async source(c: Container, size: boolean, graph = true): Promise<ViewSource> {
    const src: ViewSource = { record: c.record, hostConfig: c.hostConfig, execIds: this.d.execs.idsOf(c.id) };
    // links that registered no link name (on a user-defined network: DNS aliases) show as null
    if (c.record.Links || c.hostConfig.Links?.length) src.links = this.d.net.links.view(c);
    if (graph) await this.addGraphDriver(c, src);
    if (size) {
      src.sizeRw = await this.d.snapshots.usage(c.id).catch(() => 0);
      const image = await this.d.images.get(c.record.Image).catch(() => undefined);
      src.sizeRootFs = (image?.size ?? 0) + src.sizeRw;
    }
    return src;
  }

  /**
   * GraphDriver.Data: the writable snapshot's paths, fixed from create on (worked out once; while
   * a removal is under way the snapshot may be gone, so the snapshotter is asked then).
   */
  async addGraphDriver(c: Container, src: Pick<ViewSource, 'graphDriverData'> = {}): Promise<void> {
    const stable = !c.removing && !c.removed && !c.state.RemovalInProgress;
    if (stable && c.graphDriverData) {
      src.graphDriverData = { ...c.graphDriverData };
      return;
    }
    try {
      const data = { ...(await this.d.snapshots.paths(c.id)) };
      if (stable) c.graphDriverData = { ...data };
      src.graphDriverData = data;
    } catch {
      // snapshot gone (removal in progress)
    }
  }

  async inspect(idOrName: string, o?: { size?: boolean }): Promise<ContainerInspect> {
    return inspectView(await this.source(this.d.set.get(idOrName), o?.size ?? false));
  }

  async list(o: ListOptions): Promise<ContainerSummary[]> {
    const { set, images } = this.d;
    const all = [...set.values()].map((c) => ({ record: c.record, hostConfig: c.hostConfig }));
    const ancestorIds = new Map<string, string[]>();
    for (const ref of o.filters?.get('ancestor') ?? []) {
      const img = await images.resolve(ref).catch(() => undefined);
      ancestorIds.set(ref, img ? [img.id] : []);
    }
    const picked = filterContainers(
      all,
      {
        all: o.all ?? false,
        limit: o.limit ?? 0,
        since: o.since,
        before: o.before,
        filters: o.filters ?? new Map(),
      },
      {
        resolve: (x) => set.names.resolve(x),
        ancestorIds: (ref) => ancestorIds.get(ref) ?? [],
        networkId: (name) => this.d.net.networkId(name),
      },
    );
    const byId = new Map((await images.list()).map((i) => [i.id, i]));
    const now = Date.now();
    const byName = new Map<string, string | undefined>();
    const out: ContainerSummary[] = [];
    for (const p of picked) {
      const c = set.find(p.record.ID);
      if (!c) continue;
      const src = await this.source(c, o.size ?? false, false);
      // Image: the name given at create; the image ID when that name now means another image.
      let imageName = c.record.Config.Image ?? '';
      const img = byId.get(c.record.Image);
      if (!img) imageName = c.record.Image;
      else {
        if (!byName.has(imageName)) {
          byName.set(imageName, (await images.resolve(imageName).catch(() => undefined))?.id);
        }
        if (byName.get(imageName) !== c.record.Image) imageName = img.repoTags[0] ?? c.record.Image;
      }
      out.push(listItemView({ ...src, imageName, now, names: this.d.net.links.names(c) }));
    }
    return out;
  }
}
