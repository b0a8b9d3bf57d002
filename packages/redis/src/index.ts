/**
 * `@baton/redis`: Baton's Redis adapter. Importing it registers the `redis://`, `rediss://`
 * and `redlock://` schemes with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/redis
 */
import { type BackendUrl, registerBackend } from "@baton/core";
import { REDIS_GUARANTEES, RedisBackend } from "./redis-backend.js";
import { resolveRedisOptions } from "./redis-options.js";
import { REDLOCK_GUARANTEES, RedlockBackend } from "./redlock-backend.js";
import { resolveRedlockOptions } from "./redlock-options.js";

export type { RedisAddress, RedisNatMap } from "./nat-map.js";
export { REDIS_GUARANTEES, RedisBackend } from "./redis-backend.js";
export { LockKeys, lockKeys } from "./redis-keys.js";
export {
  DEFAULT_COMMAND_TIMEOUT_MS,
  DEFAULT_KEY_PREFIX,
  type RedisBackendOptions,
} from "./redis-options.js";
export { REDLOCK_GUARANTEES, RedlockBackend } from "./redlock-backend.js";
export { defaultNodeTimeoutMs, type RedlockBackendOptions } from "./redlock-options.js";

// The URL checks run in createCoordinator, before any I/O: a misspelt option fails there.
const checkRedisUrl = (url: BackendUrl) => {
  resolveRedisOptions({ url: url.href }, () => url);
};
const redis = { checkUrl: checkRedisUrl, guarantees: REDIS_GUARANTEES };
registerBackend("redis", (url) => new RedisBackend({ url: url.href }), redis);
registerBackend("rediss", (url) => new RedisBackend({ url: url.href }), redis);
registerBackend("redlock", (url) => new RedlockBackend({ url: url.href }), {
  checkUrl: (url) => {
    resolveRedlockOptions({ url: url.href }, () => url);
  },
  guarantees: REDLOCK_GUARANTEES,
});
