import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { RedisBackend } from "../src/index.js";

describeBackend("redis", (url) => {
  runConformance(
    {
      name: "redis",
      ttlMs: 1_000,
      url,
      // The default key prefix, as in the worker processes, which are given the URL only.
      createBackend: () => new RedisBackend({ url }),
    },
    {
      fencing: "single-node",
      fifo: true,
      watch: true,
      crossProcess: true,
      semaphores: true,
      timeLeft: true,
    },
  );
});
