/**
 * A bounded map that drops the least recently used entry: Map insertion order is the recency order, and a get moves
 * its entry to the end. The one eviction rule here, for root sessions and for child -> parent links (as loop-guard).
 */
export class RecentMap<V> {
  private readonly map = new Map<string, V>()
  constructor(readonly capacity: number) {}

  private newest: string | undefined // the most recently used key: asking for it again needs no reordering

  /** The value, marked most recently used. */
  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined && key !== this.newest) {
      this.map.delete(key)
      this.map.set(key, value)
      this.newest = key
    }
    return value
  }

  /** Stores the value as the most recently used, dropping the least recently used beyond the capacity. */
  set(key: string, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    this.newest = key
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string)
  }

  delete(key: string): void {
    this.map.delete(key)
    if (key === this.newest) this.newest = undefined
  }

  values(): IterableIterator<V> {
    return this.map.values()
  }
}
