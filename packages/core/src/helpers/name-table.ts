/** A name whose entry was deleted: kept until the next compaction (see {@link NameTable}). */
const VACANT: object = Object.freeze({});

/**
 * Deleted names a table keeps before it copies its live entries to a new `Map`, at least; and
 * at least as many as it holds.
 */
const COMPACT_AT = 1_024;

/**
 * A table keyed by lock name, for registries that gain and lose an entry on every lock
 * operation (names held, names being acquired, names locked in process).
 *
 * Why not a bare `Map`: V8 rebuilds a `Map`'s hash table every few dozen inserts once deleted
 * entries fill it, and links the old table to the new one. When the old table had already
 * moved to the old generation, that link keeps every later table (with the names and values
 * each one held) alive through every young-generation collection until the next full one, so
 * a coordinator serving many callers would copy and promote the garbage of every recent lock
 * operation. Here a deleted name stays in the `Map` as vacant (a name used again takes its
 * slot back without a rebuild), and once the vacant names outnumber both the live ones and
 * 1,024 the live entries move to a new `Map`: measured, see docs/hot-path.md, "Core".
 *
 * Iteration follows the order names first entered the current `Map`.
 *
 * @example
 * const held = new NameTable<{ token: bigint }>();
 * held.set("invoice/42", { token: 7n });
 * held.get("invoice/42")?.token; // 7n
 * held.delete("invoice/42"); // true
 */
export class NameTable<V extends NonNullable<unknown>> {
  // Hot path: see docs/hot-path.md, "Core".
  #map = new Map<string, V | typeof VACANT>();
  #size = 0;
  #vacant = 0;

  /** How many names the table holds. */
  get size(): number {
    return this.#size;
  }

  /** The value of `name`, or `undefined` when the table has none. */
  get(name: string): V | undefined {
    const value = this.#map.get(name);
    return value === VACANT ? undefined : (value as V | undefined);
  }

  /** True when the table holds `name`. */
  has(name: string): boolean {
    const value = this.#map.get(name);
    return value !== undefined && value !== VACANT;
  }

  /** Sets the value of `name`. */
  set(name: string, value: V): this {
    const map = this.#map;
    const was = map.get(name);
    if (was === undefined) this.#size++;
    else if (was === VACANT) {
      this.#size++;
      this.#vacant--;
    }
    map.set(name, value);
    return this;
  }

  /** Removes `name`; false when the table did not hold it. */
  delete(name: string): boolean {
    const map = this.#map;
    const was = map.get(name);
    if (was === undefined || was === VACANT) return false;
    map.set(name, VACANT);
    this.#size--;
    if (++this.#vacant > COMPACT_AT && this.#vacant > this.#size) this.#compact();
    return true;
  }

  /** Removes every name. */
  clear(): void {
    this.#map = new Map();
    this.#size = 0;
    this.#vacant = 0;
  }

  /** The names and values now: a copy, so the caller may change the table as it goes. */
  entries(): [string, V][] {
    const out: [string, V][] = [];
    for (const [name, value] of this.#map) if (value !== VACANT) out.push([name, value as V]);
    return out;
  }

  /** The names now: a copy, so the caller may change the table as it goes. */
  keys(): string[] {
    const out: string[] = [];
    for (const [name, value] of this.#map) if (value !== VACANT) out.push(name);
    return out;
  }

  /** The values now: a copy, so the caller may change the table as it goes. */
  values(): V[] {
    const out: V[] = [];
    for (const value of this.#map.values()) if (value !== VACANT) out.push(value as V);
    return out;
  }

  /** Moves the live entries to a new `Map`, leaving the vacant names behind. */
  #compact(): void {
    const live = new Map<string, V | typeof VACANT>();
    for (const [name, value] of this.#map) if (value !== VACANT) live.set(name, value);
    this.#map = live;
    this.#vacant = 0;
  }
}
