import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { nodeRedisClient, OwningRedisBackend } from "./node-redis-clients.js";

// The whole suite once more, on the same server, with the backend running every call through an
// app's own node-redis client (the current major, default options) instead of ioredis. The
// worker processes of the cross-process groups connect by URL (ioredis): both clients meet on
// the same keys, scripts and channels.
describeBackend("redis", (url) => {
  runConformance(
    {
      name: "redis via node-redis",
      ttlMs: 1_000,
      url,
      createBackend: async () => new OwningRedisBackend(await nodeRedisClient("node-redis 6", url)),
      // The fault scenarios: the node-redis client connects through the proxy.
      proxiedBackend: async (proxy) => {
        const [host, port] = url.replace(/^redis:\/\//, "").split(/[:/]/);
        const to = await proxy({ host: host as string, port: Number(port) });
        return new OwningRedisBackend(
          await nodeRedisClient("node-redis 6", `${to.host}:${to.port}`),
        );
      },
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
