import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runConformance } from "@baton/conformance";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import { afterAll, beforeAll } from "vitest";
import { RedisBackend } from "../src/index.js";

// A private 3-master Redis Cluster (redis-server --cluster-enabled yes + redis-cli --cluster
// create), started here rather than in the global setup. Selected with the "redis" backend.
// The election group needs the URL when tests are registered, before this cluster exists, so
// it runs against the single node only (redis.conformance.test.ts).
describeBackend("redis", () => {
  let cluster: ServerGroup | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "baton-redis-cluster-"));
    cluster = await startRedisCluster({ dir });
  });
  afterAll(async () => {
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const url = () => {
    if (cluster === undefined) throw new Error("redis cluster not started");
    return cluster.url;
  };

  runConformance(
    {
      name: "redis-cluster",
      ttlMs: 1_000,
      createBackend: () => new RedisBackend({ url: url(), keyPrefix: "conf:" }),
    },
    { fencing: "single-node", fifo: false, watch: false, crossProcess: true },
  );
});
