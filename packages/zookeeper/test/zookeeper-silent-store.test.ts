import { silentListenerPerTest, silentStoreTests } from "@baton/conformance/faults";
import { describe } from "vitest";
import { ZookeeperBackend } from "../src/index.js";

describe("zookeeper against a store that accepts connections and never answers", () => {
  silentStoreTests({
    listener: silentListenerPerTest(),
    url: (silent) => `zookeeper://127.0.0.1:${silent.port}`,
    backend: (silent) =>
      new ZookeeperBackend({ hosts: [`127.0.0.1:${silent.port}`], connectTimeoutMs: 60_000 }),
  });
});
