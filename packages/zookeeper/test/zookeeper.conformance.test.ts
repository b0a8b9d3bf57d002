import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { afterAll } from "vitest";
import { ZookeeperBackend } from "../src/index.js";
import { ProxiedClients } from "./support/proxied-clients.js";

describeBackend("zookeeper", (url) => {
  // Every session's client goes through its own proxies, so freezeSession can silence exactly
  // one session: the ensemble then expires it as it would a frozen (SIGSTOPped) holder.
  const clients = new ProxiedClients();
  afterAll(async () => {
    await clients.close();
  });
  runConformance(
    {
      name: "zookeeper",
      ttlMs: 2_000,
      url,
      createBackend: () => ZookeeperBackend.fromUrl(url, { createClient: clients.factory }),
      freezeSession: (session) => clients.blackhole(session),
    },
    {
      fencing: "monotonic",
      fifo: true,
      watch: true,
      crossProcess: true,
      semaphores: true,
      timeLeft: false,
    },
  );
});
