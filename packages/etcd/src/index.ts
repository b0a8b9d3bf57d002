/**
 * `@baton/etcd`: Baton's etcd backend (one lease per session, fencing tokens from the
 * revision of each grant, a FIFO queue of keys per lock). Importing it registers the `etcd://` scheme with
 * `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/etcd
 */
import { registerBackend } from "@baton/core";
import { ETCD_GUARANTEES, EtcdBackend } from "./etcd-backend.js";
import { etcdOptionsFromUrl } from "./etcd-options.js";

export { ETCD_GUARANTEES, EtcdBackend } from "./etcd-backend.js";
export type { EtcdCallOptions, EtcdClient, EtcdStream } from "./etcd-client.js";
export {
  DEFAULT_PORT,
  DEFAULT_PREFIX,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type EtcdBackendOptions,
  type EtcdTlsOptions,
  etcdOptionsFromUrl,
} from "./etcd-options.js";
export type { EtcdSession } from "./etcd-session.js";
export { MIN_LEASE_SECONDS } from "./lease-ttl.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("etcd", (url) => new EtcdBackend(etcdOptionsFromUrl(url)), {
  checkUrl: etcdOptionsFromUrl,
  guarantees: ETCD_GUARANTEES,
});
