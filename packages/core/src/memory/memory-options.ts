import type { BackendUrl } from "../contract/backend-url.js";
import { ConfigError } from "../contract/errors.js";
import type { Clock } from "../helpers/clock.js";
import { checkString } from "../helpers/validate.js";
import { MemoryStore } from "./memory-store.js";

/**
 * Options of {@link MemoryBackend}. With none, the backend has a private store on the system
 * clock: its locks exclude only the coordinators built on that one backend.
 */
export interface MemoryBackendOptions {
  /** Share locks with other backends built on this store (default: a new private store). */
  readonly store?: MemoryStore;
  /**
   * Share locks with every backend of this process given the same name: what `memory://NAME`
   * builds. Not with `store` or `clock`: a named store is created once, on the system clock.
   */
  readonly storeName?: string;
  /** Clock of a new private store, e.g. a `ManualClock` in tests. Ignored when `store` is given. */
  readonly clock?: Clock;
}

const OPTION_KEYS: readonly string[] = ["store", "storeName", "clock"];

/** Longest {@link MemoryBackendOptions.storeName}, in characters. */
const STORE_NAME_MAX_LENGTH = 256;

/**
 * Checks {@link MemoryBackendOptions} before anything is built; throws `ConfigError` naming
 * the field.
 */
export function checkMemoryOptions(options: MemoryBackendOptions | undefined): void {
  if (options === undefined) return;
  if (options === null || typeof options !== "object") {
    throw new ConfigError("options", "pass { store }, { storeName }, { clock } or nothing");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) {
      throw new ConfigError(
        `options.${key}`,
        `is not a memory backend option (${OPTION_KEYS.join(", ")})`,
      );
    }
  }
  const { store, storeName, clock } = options;
  if (store !== undefined && !(store instanceof MemoryStore)) {
    throw new ConfigError("store", "must be a MemoryStore");
  }
  if (clock !== undefined && !isClock(clock)) {
    throw new ConfigError("clock", "must be a Clock: { now(), setTimer(callback, delayMs) }");
  }
  if (storeName === undefined) return;
  checkStoreName(storeName, "storeName");
  if (store !== undefined) {
    throw new ConfigError("storeName", "give `store` or `storeName`, not both");
  }
  if (clock !== undefined) {
    throw new ConfigError(
      "clock",
      "a named store runs on the system clock; for another clock pass `store: new MemoryStore({ clock })`",
    );
  }
}

/** Throws `ConfigError` (on `field`) unless `value` is a store name. */
function checkStoreName(value: unknown, field: string): void {
  if (checkString(value, field, STORE_NAME_MAX_LENGTH) === "") {
    throw new ConfigError(field, "the store name must not be empty (omit it for a private store)");
  }
}

function isClock(value: unknown): value is Clock {
  const clock = value as Partial<Clock> | null;
  return (
    typeof clock === "object" &&
    clock !== null &&
    typeof clock.now === "function" &&
    typeof clock.setTimer === "function"
  );
}

/**
 * The options a `memory:` URL stands for, without any I/O: `memory://` is a private store,
 * `memory://NAME` the store of that name, shared by every backend of this process given it
 * (the name is everything after `memory://`, trailing slashes dropped). Throws `ConfigError`:
 * field `url` for query parameters, a user name or password, or a port (none means anything
 * here, so a typo is refused rather than ignored); field `storeName` for a bad name.
 *
 * @example
 * new MemoryBackend(memoryOptionsFromUrl(parseBackendUrl("memory://jobs")));
 */
export function memoryOptionsFromUrl(url: BackendUrl): MemoryBackendOptions {
  const [param] = url.searchParams.keys();
  if (param !== undefined) {
    throw new ConfigError("url", `memory:// takes no parameters, got "?${param}="`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new ConfigError("url", "memory:// takes no user name or password");
  }
  const withPort = url.hosts.find((h) => h.port !== undefined);
  if (withPort !== undefined) {
    throw new ConfigError(
      "url",
      `memory://NAME takes no port, got "${withPort.host}:${withPort.port}"`,
    );
  }
  const storeName = (url.hosts.map((h) => h.host).join(",") + url.pathname).replace(/\/+$/, "");
  if (storeName === "") return {};
  checkStoreName(storeName, "storeName"); // the option this URL sets
  return { storeName };
}
