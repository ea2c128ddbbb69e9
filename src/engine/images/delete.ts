import { BerthError, conflict, notFound } from '../../common/errors.js';
import { shortId } from '../../common/ids.js';
import {
  familiarString,
  fullName,
  parseAnyReference,
  type Reference,
  referenceString,
} from '../../common/reference.js';
import type { LayerCollector } from './gc.js';
import type { ImageEvents } from './image.events.js';
import { hex, type ImageStore, type LoadedImage } from './image.store.js';
import type { ImageDeleteItem, ImageRemoveOptions, ImageUsers } from './images.types.js';
import { checkImagePlatform } from './platform.js';
import { hasDigest, type ReferenceStore, storedForm } from './references.js';

class ImageDeleteConflict extends BerthError {
  constructor(
    readonly id: string,
    readonly hard: boolean,
    readonly used: boolean,
    what: string,
  ) {
    super(
      'Conflict',
      `conflict: unable to delete ${shortId(id)} (${hard ? 'cannot be forced' : 'must be forced'}) - ${what}`,
    );
  }
}

// moby's conflict masks: hard conflicts cannot be forced, soft ones can.
const CONFLICT_CHILD = 1;
const CONFLICT_RUNNING = 2;
const CONFLICT_ACTIVE_REF = 4;
const CONFLICT_STOPPED = 8;
const CONFLICT_HARD = CONFLICT_CHILD | CONFLICT_RUNNING;
const CONFLICT_SOFT = CONFLICT_ACTIVE_REF | CONFLICT_STOPPED;

/** docker rmi as moby's ImageDelete: untag, conflicts by mask, delete with freed layers and parents. */
export class ImageDeleter {
  constructor(
    private readonly deps: {
      store: Pick<ImageStore, 'locked' | 'has' | 'get' | 'hasChildren' | 'delete'>;
      refs: ReferenceStore;
      events: ImageEvents;
      users: ImageUsers;
      gc: Pick<LayerCollector, 'collectLocked'>;
    },
  ) {}

  async remove(name: string, opts: ImageRemoveOptions = {}): Promise<ImageDeleteItem[]> {
    const force = opts.force ?? false;
    const prune = opts.prune ?? true;
    const { refs, events } = this.deps;
    return this.deps.store.locked(async () => {
      const { id, notFoundName } = refs.lookup(name);
      if (!id) throw notFound(`No such image: ${notFoundName}`);
      const found = this.deps.store.get(id);
      if (found) checkImagePlatform(name, found.config, opts.platform);
      const records: ImageDeleteItem[] = [];
      let repoRefs = refs.refsOf(id);
      let removedRepositoryRef = false;
      if (!isImageIdPrefix(id, name)) {
        if (!force && isSingleReference(repoRefs)) {
          const user = this.deps.users.containersUsing(id)[0];
          if (user) {
            throw conflict(
              `conflict: unable to remove repository reference "${name}" (must force) - container ${shortId(user.id)} is using its referenced image ${shortId(id)}`,
            );
          }
        }
        const parsed = parseAnyReference(name);
        const target = parsed.kind === 'named' ? storedForm(parsed.ref) : undefined;
        if (target && refs.idOf(referenceString(target)) === id) {
          refs.delete(referenceString(target));
          await refs.save();
          records.push({ Untagged: familiarString(target) });
          events.publish('untag', id, id);
          repoRefs = refs.refsOf(id);
          if (!hasDigest(target)) {
            const sameRepoTag = repoRefs.some((r) => !hasDigest(r) && fullName(r) === fullName(target));
            if (!sameRepoTag) {
              for (const r of repoRefs) {
                if (hasDigest(r) && fullName(r) === fullName(target)) {
                  refs.delete(referenceString(r));
                  records.push({ Untagged: familiarString(r) });
                }
              }
              await refs.save();
              repoRefs = refs.refsOf(id);
            }
          }
          if (repoRefs.length > 0) return records;
          removedRepositoryRef = true;
        }
      } else if (isSingleReference(repoRefs)) {
        let mask = CONFLICT_HARD;
        if (!force) mask |= CONFLICT_SOFT & ~CONFLICT_ACTIVE_REF;
        const c = this.conflict(id, mask);
        if (c) throw c;
        for (const r of repoRefs) {
          refs.delete(referenceString(r));
          records.push({ Untagged: familiarString(r) });
          events.publish('untag', id, id);
        }
        await refs.save();
      }
      await this.deleteLocked(id, records, force, prune, removedRepositoryRef);
      return records;
    });
  }

  /** moby's checkImageDeleteConflict: the first conflict of those in `mask`. */
  private conflict(id: string, mask: number): ImageDeleteConflict | undefined {
    if (mask & CONFLICT_CHILD && this.deps.store.hasChildren(id)) {
      return new ImageDeleteConflict(id, true, false, 'image has dependent child images');
    }
    const users = this.deps.users.containersUsing(id);
    if (mask & CONFLICT_RUNNING) {
      const running = users.find((u) => u.running);
      if (running) {
        return new ImageDeleteConflict(
          id,
          true,
          true,
          `image is being used by running container ${shortId(running.id)}`,
        );
      }
    }
    if (mask & CONFLICT_ACTIVE_REF && this.deps.refs.refsOf(id).length > 0) {
      return new ImageDeleteConflict(id, false, false, 'image is referenced in multiple repositories');
    }
    if (mask & CONFLICT_STOPPED) {
      const stopped = users.find((u) => !u.running);
      if (stopped) {
        return new ImageDeleteConflict(
          id,
          false,
          true,
          `image is being used by stopped container ${shortId(stopped.id)}`,
        );
      }
    }
    return undefined;
  }

  /**
   * moby's imageDeleteHelper, under the lock: untag, delete, record the freed layers, then the
   * parent when pruning. `quiet`: a conflict ends it silently (a parent, or an untagged image
   * still in use).
   */
  private async deleteLocked(
    id: string,
    records: ImageDeleteItem[],
    force: boolean,
    prune: boolean,
    quiet: boolean,
  ): Promise<void> {
    const { store, refs, events } = this.deps;
    let mask = CONFLICT_HARD;
    if (!force) mask |= CONFLICT_SOFT;
    const c = this.conflict(id, mask);
    if (c) {
      const danglingImage = refs.refsOf(id).length === 0;
      if (quiet && (!danglingImage || c.used)) return;
      throw c;
    }
    const img = store.get(id) as LoadedImage;
    const parent = img.meta.parent;
    const names = refs.refsOf(id);
    for (const r of names) {
      refs.delete(referenceString(r));
      records.push({ Untagged: familiarString(r) });
      events.publish('untag', id, id);
    }
    if (names.length) await refs.save();
    await store.delete(id);
    // dockerd looks the labels up when it logs: the image is gone, so `delete` has none
    events.publish('delete', id, id, {});
    records.push({ Deleted: id });
    const removed = new Set(await this.deps.gc.collectLocked());
    for (const chainId of [...img.chain].reverse())
      if (removed.has(chainId)) records.push({ Deleted: chainId });
    if (prune && parent && store.has(parent)) await this.deleteLocked(parent, records, false, true, true);
  }
}

/** isImageIDPrefix of moby: does the user's string name the image by (a prefix of) its ID? */
function isImageIdPrefix(id: string, s: string): boolean {
  if (id.startsWith(s)) return true;
  return hex(id).startsWith(s);
}

/** moby's isSingleReference: one tag (plus digests of that same repository), or one digest. */
function isSingleReference(refs: Reference[]): boolean {
  if (refs.length <= 1) return refs.length === 1;
  let single: Reference | undefined;
  const canonicalNames = new Set<string>();
  for (const r of refs) {
    if (hasDigest(r)) canonicalNames.add(fullName(r));
    else if (!single) single = r;
    else return false;
  }
  const s = single ?? (refs[0] as Reference);
  return canonicalNames.size === 1 && canonicalNames.has(fullName(s));
}
