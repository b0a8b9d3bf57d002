/**
 * `@baton/zookeeper`: the ZooKeeper backend of Baton. Importing it registers the
 * `zookeeper://h1:2181,h2:2181/chroot` scheme with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/zookeeper
 */
import { registerBackend } from "@baton/core";
import { checkZookeeperUrl, ZOOKEEPER_GUARANTEES, ZookeeperBackend } from "./zookeeper-backend.js";

export { czxidToken, encodeLockName } from "./lock-node.js";
export {
  type ClientFactory,
  type ClientRequest,
  checkZookeeperUrl,
  ZOOKEEPER_GUARANTEES,
  ZookeeperBackend,
  type ZookeeperBackendOptions,
  zookeeperOptionsFromUrl,
} from "./zookeeper-backend.js";
export { ZookeeperSession } from "./zookeeper-session.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("zookeeper", (url) => ZookeeperBackend.fromUrl(url), {
  checkUrl: checkZookeeperUrl,
  guarantees: ZOOKEEPER_GUARANTEES,
});
