/**
 * The one eviction rule of both plugins: a Map in least-recently-used order (insertion order, refreshed on use),
 * bounded; beyond its capacity the least recently used entry is dropped. loop-guard keeps its sessions, steps,
 * watched parts and cuts in it; semantic-anchors its root sessions, child -> parent links, and (read with peek, so
 * the oldest goes first) the calls waiting for their end.
 */

export class RecentMap<V> {
  private readonly map = new Map<string, V>()
  /** The most recently used key: asking for it again needs no reordering. */
  private newest: string | null = null
  constructor(readonly capacity: number) {}

  /** The value, marked most recently used; undefined when it is not kept. */
  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined && key !== this.newest) {
      this.map.delete(key)
      this.map.set(key, value)
      this.newest = key
    }
    return value
  }

  /** The value without changing the order. */
  peek(key: string): V | undefined {
    return this.map.get(key)
  }

  /** Stores the value as the most recently used, dropping the least recently used beyond the capacity. */
  set(key: string, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    this.newest = key
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string)
  }

  has(key: string): boolean {
    return this.map.has(key)
  }

  delete(key: string): void {
    this.map.delete(key)
    if (key === this.newest) this.newest = null
  }

  /** Deletes every entry whose value matches. */
  deleteWhere(matches: (value: V) => boolean): void {
    for (const [key, value] of [...this.map]) if (matches(value)) this.delete(key)
  }

  clear(): void {
    this.map.clear()
    this.newest = null
  }

  values(): IterableIterator<V> {
    return this.map.values()
  }

  entries(): IterableIterator<[string, V]> {
    return this.map.entries()
  }

  get size(): number {
    return this.map.size
  }
}
