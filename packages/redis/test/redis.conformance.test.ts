import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { RedisBackend } from "../src/index.js";

describeBackend("redis", (url) => {
  runConformance(
    {
      name: "redis",
      ttlMs: 1_000,
      url,
      createBackend: () => new RedisBackend({ url, keyPrefix: "conf:" }),
    },
    { fencing: "single-node", fifo: true, watch: true, crossProcess: true, semaphores: false },
  );
});
