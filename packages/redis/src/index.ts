/**
 * `@baton/redis`: Baton's Redis adapter. Importing it registers the `redis://`, `rediss://`
 * and `redlock://` schemes with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/redis
 */
import { registerBackend } from "@baton/core";
import { RedisBackend } from "./redis-backend.js";
import { RedlockBackend } from "./redlock-backend.js";

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

registerBackend("redis", (url) => new RedisBackend({ url: url.href }));
registerBackend("rediss", (url) => new RedisBackend({ url: url.href }));
registerBackend("redlock", (url) => new RedlockBackend({ url: url.href }));
