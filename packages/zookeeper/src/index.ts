/**
 * `@baton/zookeeper`: the ZooKeeper backend of Baton. Importing it registers the
 * `zookeeper://h1:2181,h2:2181/chroot` scheme with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/zookeeper
 */
import { registerBackend } from "@baton/core";
import { ZOOKEEPER_GUARANTEES, ZookeeperBackend } from "./zookeeper-backend.js";
import { zookeeperOptionsFromUrl } from "./zookeeper-options.js";

export { ZOOKEEPER_GUARANTEES, ZookeeperBackend } from "./zookeeper-backend.js";
export type { ClientListener, ZookeeperClientLike } from "./zookeeper-client-like.js";
export { czxidToken } from "./zookeeper-codec.js";
export { encodeLockName } from "./zookeeper-keys.js";
export {
  type ClientFactory,
  type ClientRequest,
  checkZookeeperUrl,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_PORT,
  DEFAULT_PREFIX,
  type ZookeeperBackendOptions,
  zookeeperOptionsFromUrl,
} from "./zookeeper-options.js";
export { ZookeeperSession } from "./zookeeper-session.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("zookeeper", (url) => new ZookeeperBackend(zookeeperOptionsFromUrl(url)), {
  checkUrl: zookeeperOptionsFromUrl,
  guarantees: ZOOKEEPER_GUARANTEES,
});
