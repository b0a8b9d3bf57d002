import { runRecordLoss } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import type { Client } from "node-zookeeper-client";
import { afterAll, beforeAll } from "vitest";
import { ZookeeperBackend } from "../src/index.js";
import { recordPath, recordRoot } from "../src/zookeeper-keys.js";
import { inspector, removeTree } from "./support/counting-clients.js";

describeBackend("zookeeper", (url) => {
  let admin: Client;
  let root = "";
  beforeAll(async () => {
    admin = await inspector(url.slice("zookeeper://".length));
  });
  afterAll(() => admin?.close());
  runRecordLoss({
    name: "zookeeper",
    ttlMs: 2_000,
    url,
    createBackend: () => {
      const backend = ZookeeperBackend.fromUrl(url);
      root = backend.root;
      return backend;
    },
    // The record's node and anything under it, as `deleteall` would.
    deleteRecord: (key) => removeTree(admin, recordPath(recordRoot(root), key)),
  });
});
