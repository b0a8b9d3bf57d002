import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { etcdOptionsFromUrl } from "../src/etcd-options.js";
import { EtcdBackend } from "../src/index.js";

describeBackend("etcd", (url) => {
  runConformance(
    {
      name: "etcd",
      ttlMs: 2_000,
      url,
      createBackend: () => new EtcdBackend(etcdOptionsFromUrl(parseBackendUrl(url))),
    },
    {
      fencing: "monotonic",
      fifo: true,
      watch: true,
      crossProcess: true,
      semaphores: true,
      timeLeft: true,
    },
  );
});
