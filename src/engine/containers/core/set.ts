import { errorMessage, invalidParameter, isKind, notFound } from '../../../common/errors.js';
import type { Container } from './container.js';
import { NameRegistry } from './names.js';

/**
 * The engine's containers: by ID, by name (and unique ID prefix), and the creates under way.
 * Every room finds containers here.
 */
export class ContainerSet {
  readonly names = new NameRegistry();
  private readonly byId = new Map<string, Container>();
  /** Creates under way: the new container's ID and the image it was resolved to (rmi sees them). */
  readonly creating = new Map<string, string>();

  /** By ID, name or unique ID prefix; 404 `No such container: x`. */
  get(idOrName: string): Container {
    const id = this.names.resolve(idOrName);
    const c = this.byId.get(id);
    // a name reserved by a create still under way: not a container yet (dockerd: no such container)
    if (!c) throw notFound(`No such container: ${idOrName}`);
    return c;
  }

  /** By full ID; undefined when there is none. */
  find(id: string): Container | undefined {
    return this.byId.get(id);
  }

  /** A name's container ID, or undefined (no error) when nothing has that name. */
  tryResolve(idOrName: string): string | undefined {
    try {
      return this.names.resolve(idOrName);
    } catch {
      return undefined;
    }
  }

  /**
   * A container a create refers to (`container:x` modes, VolumesFrom, links): its ID, or a 400.
   * Not a 404: the docker CLI takes any 404 from create for a missing image and goes to pull it.
   */
  resolveForCreate(idOrName: string): string {
    try {
      return this.names.resolve(idOrName);
    } catch (err) {
      if (isKind(err, 'NotFound')) throw invalidParameter(errorMessage(err));
      throw err;
    }
  }

  add(c: Container): void {
    this.byId.set(c.id, c);
    this.names.addId(c.id);
  }

  delete(c: Container): void {
    this.byId.delete(c.id);
    this.names.removeId(c.id);
  }

  /** Whether `c` is still the set's container of its ID (not removed meanwhile). */
  holds(c: Container): boolean {
    return this.byId.get(c.id) === c;
  }

  values(): IterableIterator<Container> {
    return this.byId.values();
  }

  get size(): number {
    return this.byId.size;
  }
}
