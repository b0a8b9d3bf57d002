/**
 * What an entry of a {@link LinkedList} carries: the list keeps its links in the entry itself.
 * An entry is in at most one list at a time.
 *
 * @internal
 */
export interface Linked<T> {
  prevLinked: T | undefined;
  nextLinked: T | undefined;
}

/**
 * A set of objects linked through their own fields, for registries that gain and lose an entry
 * on every lock operation (in-flight acquires, live locks): adding and removing one allocates
 * nothing, where a `Set` that grows from empty and shrinks back reallocates its table each time
 * (see docs/hot-path.md, "Core").
 *
 * @internal
 */
export class LinkedList<T extends Linked<T>> {
  // Hot path: see docs/hot-path.md, "Core".
  #head: T | undefined;
  #size = 0;

  /** How many entries the list holds. */
  get size(): number {
    return this.#size;
  }

  /** Adds `entry` (which must be in no list). */
  add(entry: T): void {
    const head = this.#head;
    entry.prevLinked = undefined;
    entry.nextLinked = head;
    if (head !== undefined) head.prevLinked = entry;
    this.#head = entry;
    this.#size++;
  }

  /** True when `entry` is in this list. */
  has(entry: T): boolean {
    return entry.prevLinked !== undefined || this.#head === entry;
  }

  /** Removes `entry`; false (and nothing changes) when it is not in this list. */
  delete(entry: T): boolean {
    const { prevLinked: prev, nextLinked: next } = entry;
    if (prev === undefined) {
      if (this.#head !== entry) return false;
      this.#head = next;
    } else {
      prev.nextLinked = next;
    }
    if (next !== undefined) next.prevLinked = prev;
    entry.prevLinked = undefined;
    entry.nextLinked = undefined;
    this.#size--;
    return true;
  }

  /** The entries now, newest first: a copy, so the caller may remove entries as it goes. */
  toArray(): T[] {
    const out: T[] = [];
    for (let entry = this.#head; entry !== undefined; entry = entry.nextLinked) out.push(entry);
    return out;
  }
}
