import type {
  ForceReleaseOptions,
  KeyPage,
  KeyState,
  ListKeysOptions,
} from "../contract/backend.js";
import type { MemoryStore } from "./memory-store.js";

/**
 * Inspection and forced release for the memory backend: `listKeys`, `inspectKey` and
 * `forceRelease` of a {@link MemoryStore}. A page lists keys in code-unit order after the
 * previous page's last key (the cursor), so keys added or removed between pages neither
 * repeat nor shift the rest. A forced release is kept on the holder's session state and
 * handed to its next renewal, which reports it as revoked.
 */
export class MemoryInspection {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  /** One page of the keys of `options.space` that start with `options.prefix`. */
  listKeys(options: ListKeysOptions): KeyPage {
    if (options.signal.aborted) throw options.signal.reason;
    const store = this.#store;
    const all =
      options.space === "lock"
        ? store.lockKeys()
        : options.space === "permit"
          ? store.permits.keys()
          : store.recordKeys();
    const after = options.cursor;
    const keys = all
      .filter((k) => k.startsWith(options.prefix) && (after === undefined || k > after))
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (keys.length <= options.limit) return { keys };
    const page = keys.slice(0, options.limit);
    return { keys: page, cursor: page[page.length - 1] as string };
  }

  /** The holders and waiters of one lock or permit key, or `null` when it has neither. */
  inspectKey(space: "lock" | "permit", key: string): KeyState | null {
    return space === "lock" ? this.#store.inspectLock(key) : this.#store.permits.inspect(key);
  }

  /** Frees the grant of `key` with `options.token`, whoever holds it; false when none does. */
  forceRelease(space: "lock" | "permit", key: string, options: ForceReleaseOptions): boolean {
    if (options.signal.aborted) throw options.signal.reason;
    return space === "lock"
      ? this.#store.forceRelease(key, options.token, options.reason)
      : this.#store.permits.forceRelease(key, options.token, options.reason);
  }
}
