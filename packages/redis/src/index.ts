/**
 * `@baton/redis`: Baton's Redis adapter. Importing it registers the `redis://`, `rediss://`
 * and `redlock://` schemes with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/redis
 */
import { registerBackend } from "@baton/core";
import { REDIS_GUARANTEES, RedisBackend } from "./redis-backend.js";
import { redisOptionsFromUrl } from "./redis-options.js";
import { REDLOCK_GUARANTEES, RedlockBackend } from "./redlock-backend.js";
import { redlockOptionsFromUrl } from "./redlock-options.js";

export type { RedisAddress, RedisNatMap } from "./nat-map.js";
export { REDIS_GUARANTEES, RedisBackend } from "./redis-backend.js";
export type {
  NodeRedisClientLike,
  NodeRedisListener,
  RedisClientLike,
} from "./redis-client-like.js";
export { LockKeys, lockKeys, PermitKeys, permitKeys, recordKey } from "./redis-keys.js";
export {
  DEFAULT_COMMAND_TIMEOUT_MS,
  DEFAULT_KEY_PREFIX,
  type RedisBackendOptions,
  redisOptionsFromUrl,
} from "./redis-options.js";
export { REDLOCK_GUARANTEES, RedlockBackend } from "./redlock-backend.js";
export {
  DEFAULT_RETRY_MAX_MS,
  DEFAULT_RETRY_MIN_MS,
  defaultNodeTimeoutMs,
  type RedlockBackendOptions,
  redlockOptionsFromUrl,
} from "./redlock-options.js";

// The URL checks run in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("redis", (url) => new RedisBackend(redisOptionsFromUrl(url)), {
  checkUrl: redisOptionsFromUrl,
  guarantees: REDIS_GUARANTEES,
});
registerBackend("rediss", (url) => new RedisBackend(redisOptionsFromUrl(url)), {
  checkUrl: redisOptionsFromUrl,
  guarantees: REDIS_GUARANTEES,
});
registerBackend("redlock", (url) => new RedlockBackend(redlockOptionsFromUrl(url)), {
  checkUrl: redlockOptionsFromUrl,
  guarantees: REDLOCK_GUARANTEES,
});
