/** Which containers reference which volumes: a set of container IDs per volume name. */
export class VolumeRefs {
  private readonly byVolume = new Map<string, Set<string>>();

  add(name: string, id: string): void {
    let set = this.byVolume.get(name);
    if (!set) {
      set = new Set();
      this.byVolume.set(name, set);
    }
    set.add(id);
  }

  /** Returns how many remain. */
  delete(name: string, id: string): number {
    const set = this.byVolume.get(name);
    if (!set) return 0;
    set.delete(id);
    if (set.size === 0) this.byVolume.delete(name);
    return set.size;
  }

  has(name: string, id: string): boolean {
    return this.byVolume.get(name)?.has(id) ?? false;
  }

  count(name: string): number {
    return this.byVolume.get(name)?.size ?? 0;
  }

  ids(name: string): string[] {
    return [...(this.byVolume.get(name) ?? [])];
  }

  forget(name: string): void {
    this.byVolume.delete(name);
  }
}
