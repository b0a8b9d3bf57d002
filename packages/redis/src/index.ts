/**
 * `@baton/redis`: Baton's Redis adapter. Importing it registers the `redis://`, `rediss://`
 * and `redlock://` schemes with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/redis
 */
import { type BackendUrl, registerBackend } from "@baton/core";
import { RedisBackend } from "./redis-backend.js";
import { resolveRedisOptions } from "./redis-options.js";
import { RedlockBackend } from "./redlock-backend.js";
import { resolveRedlockOptions } from "./redlock-options.js";

export { LockKeys, lockKeys } from "./key-names.js";
export type { RedisAddress, RedisNatMap } from "./nat-map.js";
export { RedisBackend } from "./redis-backend.js";
export {
  DEFAULT_COMMAND_TIMEOUT_MS,
  DEFAULT_KEY_PREFIX,
  type RedisBackendOptions,
} from "./redis-options.js";
export { RedlockBackend } from "./redlock-backend.js";
export { defaultNodeTimeoutMs, type RedlockBackendOptions } from "./redlock-options.js";

// The URL checks run in createCoordinator, before any I/O: a misspelt option fails there.
const checkRedisUrl = (url: BackendUrl) => {
  resolveRedisOptions({ url: url.href }, () => url);
};
registerBackend("redis", (url) => new RedisBackend({ url: url.href }), checkRedisUrl);
registerBackend("rediss", (url) => new RedisBackend({ url: url.href }), checkRedisUrl);
registerBackend(
  "redlock",
  (url) => new RedlockBackend({ url: url.href }),
  (url) => {
    resolveRedlockOptions({ url: url.href }, () => url);
  },
);
