import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runRecordLoss } from "@baton/conformance";
import { describeBackend, type ServerGroup, startRedisCluster } from "@baton/conformance/harness";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { RedisBackend, recordKey } from "../src/index.js";

// A record lost the way a node loses data (a restart without persistence, a key evicted or
// deleted): its key is gone, and nothing else is.
const PREFIX = "loss:";

describeBackend("redis", (url) => {
  const admin = new Redis(url, { lazyConnect: true });
  afterAll(() => admin.quit());
  runRecordLoss({
    name: "redis",
    ttlMs: 1_000,
    url,
    createBackend: () => new RedisBackend({ url, keyPrefix: PREFIX }),
    deleteRecord: async (key) => {
      await admin.del(recordKey(PREFIX, key));
    },
  });
});

// A private 3-master Redis Cluster, as in redis-cluster.conformance.test.ts: each record is
// deleted on the master of its slot.
describeBackend("redis", () => {
  let cluster: ServerGroup | undefined;
  let admin: Cluster | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "baton-redis-record-loss-"));
    cluster = await startRedisCluster({ dir });
    admin = new Cluster(
      cluster.members.map((m) => {
        const [host, port] = m.address.split(":");
        return { host: host as string, port: Number(port) };
      }),
    );
  });
  afterAll(async () => {
    admin?.disconnect();
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const url = () => {
    if (cluster === undefined) throw new Error("redis cluster not started");
    return cluster.url;
  };
  runRecordLoss({
    name: "redis-cluster",
    ttlMs: 1_000,
    url,
    createBackend: () => new RedisBackend({ url: url(), keyPrefix: PREFIX }),
    deleteRecord: async (key) => {
      if (admin === undefined) throw new Error("redis cluster not started");
      await admin.del(recordKey(PREFIX, key));
    },
  });
});
