import { invalidParameter, notFound } from '../../common/errors.js';
import {
  familiarName,
  familiarString,
  parseNormalizedNamed,
  type Reference,
  referenceString,
  tagNameOnly,
  withTag,
} from '../../common/reference.js';
import type { ImageEvents } from './image.events.js';
import type { ImageStore } from './image.store.js';
import { hasDigest, type ReferenceStore } from './references.js';

/** Tagging: docker tag, and the tag import, commit (later load, pull and build) give. */
export class Tagger {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'locked' | 'markTagged'>;
      refs: ReferenceStore;
      events: ImageEvents;
    },
  ) {}

  /**
   * Point `ref` (`latest` when it has neither tag nor digest) at the image `id`, replacing what
   * it named; record LastTagTime; publish `tag`. Takes the lock.
   */
  tagId(id: string, ref: Reference): Promise<void> {
    return this.deps.store.locked(() => this.addRef(id, ref));
  }

  /** POST /images/{name}/tag: tag the image `name` as `repo[:tag]` (tag defaults to latest). */
  async tag(name: string, repo: string, tag?: string): Promise<void> {
    let ref = parseNormalizedNamed(repo);
    if (hasDigest(ref)) throw invalidParameter('refusing to create a tag with a digest reference');
    if (tag) ref = withTag(ref, tag);
    await this.deps.store.locked(async () => {
      const { id, notFoundName } = this.deps.refs.lookup(name);
      if (!id) throw notFound(`No such image: ${notFoundName}`);
      await this.addRef(id, ref);
    });
  }

  /** tagId's work, under the lock; `tag` is published named as given, as dockerd does. */
  private async addRef(id: string, given: Reference): Promise<void> {
    if (familiarName(given) === 'sha256') {
      throw invalidParameter('refusing to create an ambiguous tag using digest algorithm as name');
    }
    const ref = tagNameOnly(given);
    const text = referenceString(ref);
    // a tag that already names the image changes nothing on disk (moby's reference store returns
    // there too): its LastTagTime is written without the answer waiting for it
    const changed = this.deps.refs.idOf(text) !== id;
    if (changed) {
      this.deps.refs.set(text, id);
      await this.deps.refs.save();
    }
    await this.deps.store.markTagged(id, changed);
    this.deps.events.publish('tag', id, familiarString(given));
  }
}
