import { readFile } from 'node:fs/promises';
import { writeJsonAtomic } from '../../common/fs/atomic.js';
import {
  familiarName,
  familiarString,
  fullName,
  isIdPrefix,
  parseAnyReference,
  parseNormalizedNamed,
  type Reference,
  referenceString,
  tagNameOnly,
} from '../../common/reference.js';
import { hex, type ImageStore } from './image.store.js';

interface RepositoriesFile {
  Repositories: Record<string, Record<string, string>>;
}

export function hasDigest(ref: Reference): boolean {
  return ref.digest !== undefined;
}

/** Familiar `name:tag` strings of the tag references (RepoTags). */
export function tagStrings(refs: Reference[]): string[] {
  return refs.filter((r) => r.tag !== undefined && !hasDigest(r)).map(familiarString);
}

/** Familiar `name@digest` strings of the digest references (RepoDigests). */
export function digestStrings(refs: Reference[]): string[] {
  return refs.filter(hasDigest).map(familiarString);
}

/**
 * The key a reference is stored under: `name@digest` (a tag beside a digest dropped), else
 * `name:tag` (`latest` when there is none).
 */
export function storedForm(ref: Reference): Reference {
  return ref.digest !== undefined ? { ...ref, tag: undefined } : tagNameOnly(ref);
}

/** What the reference store asks of the images. */
export type KnownImages = Pick<ImageStore, 'has' | 'matchPrefix'>;

/**
 * The references (tags and digests) naming images, persisted as moby's `repositories.json`, and
 * the rules by which a user's string names an image. Changes run under the store's lock; call
 * save() after them.
 */
export class ReferenceStore {
  /** referenceString -> image id */
  private readonly refs = new Map<string, string>();
  private readonly parsedRefs = new Map<string, Reference>();
  /** image id -> its reference strings */
  private readonly refsById = new Map<string, Set<string>>();

  constructor(
    private readonly path: string,
    private readonly images: KnownImages,
  ) {}

  /** Read repositories.json; references to images that are gone (or malformed) are dropped. */
  async load(): Promise<void> {
    let repos: RepositoriesFile = { Repositories: {} };
    try {
      repos = JSON.parse(await readFile(this.path, 'utf8')) as RepositoriesFile;
    } catch {
      // none yet
    }
    let dropped = false;
    for (const byRef of Object.values(repos.Repositories ?? {})) {
      for (const [refText, id] of Object.entries(byRef)) {
        try {
          const ref = parseNormalizedNamed(refText);
          if (this.images.has(id)) this.set(referenceString(ref), id);
          else dropped = true;
        } catch {
          dropped = true;
        }
      }
    }
    if (dropped) await this.save();
  }

  async save(): Promise<void> {
    const repos: RepositoriesFile = { Repositories: {} };
    for (const [text, id] of this.refs) {
      const ref = parseNormalizedNamed(text);
      const name = familiarName(ref);
      repos.Repositories[name] ??= {};
      (repos.Repositories[name] as Record<string, string>)[familiarString(ref)] = id;
    }
    await writeJsonAtomic(this.path, repos);
  }

  /** The image a stored reference string names. */
  idOf(text: string): string | undefined {
    return this.refs.get(text);
  }

  /** Point the reference string `text` at `id`, replacing what it named. */
  set(text: string, id: string): void {
    const old = this.refs.get(text);
    if (old !== undefined) this.refsById.get(old)?.delete(text);
    this.refs.set(text, id);
    let set = this.refsById.get(id);
    if (!set) {
      set = new Set();
      this.refsById.set(id, set);
    }
    set.add(text);
  }

  delete(text: string): void {
    const id = this.refs.get(text);
    if (id === undefined) return;
    this.refs.delete(text);
    const set = this.refsById.get(id);
    set?.delete(text);
    if (set?.size === 0) this.refsById.delete(id);
  }

  /** The references naming `id`, sorted as moby's lexicalRefs. */
  refsOf(id: string): Reference[] {
    const out: Reference[] = [];
    for (const text of this.refsById.get(id) ?? []) out.push(this.parsed(text));
    // moby's lexicalRefs: by the full reference string (docker.io/library/... sorts among the rest).
    return out.sort((a, b) => {
      const x = referenceString(a);
      const y = referenceString(b);
      return x < y ? -1 : x > y ? 1 : 0;
    });
  }

  /** The references of the repository `name` (`docker.io/library/busybox`) and their images, sorted. */
  byName(name: string): Array<{ ref: Reference; id: string }> {
    const out: Array<{ ref: Reference; id: string }> = [];
    for (const [text, id] of this.refs) {
      const ref = this.parsed(text);
      if (fullName(ref) === name && this.images.has(id)) out.push({ ref, id });
    }
    return out.sort((a, b) => {
      const x = referenceString(a.ref);
      const y = referenceString(b.ref);
      return x < y ? -1 : x > y ? 1 : 0;
    });
  }

  /**
   * The image ID `s` names (a full ID, a reference, or a unique ID prefix), or undefined, with
   * the name a NotFound message gives; throws InvalidParameter for a malformed reference.
   */
  lookup(s: string): { id?: string; notFoundName: string } {
    const any = parseAnyReference(s);
    if (any.kind === 'id') return { id: this.images.has(any.id) ? any.id : undefined, notFoundName: any.id };
    const ref = any.ref;
    const byRef = this.refs.get(referenceString(storedForm(ref)));
    if (byRef && this.images.has(byRef)) return { id: byRef, notFoundName: familiarString(tagNameOnly(ref)) };
    if (isIdPrefix(s)) {
      const matches = this.images.matchPrefix(hex(s));
      if (matches.length === 1) return { id: matches[0], notFoundName: s };
    }
    return { notFoundName: familiarString(tagNameOnly(ref)) };
  }

  /** Parsed form of a stored reference string (memoised: list and inspect ask often). */
  private parsed(text: string): Reference {
    let ref = this.parsedRefs.get(text);
    if (!ref) {
      ref = parseNormalizedNamed(text);
      this.parsedRefs.set(text, ref);
    }
    return ref;
  }
}
