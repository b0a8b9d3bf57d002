import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { MysqlBackend } from "../src/index.js";

describeBackend("mysql", (url) => {
  runConformance(
    {
      name: "mysql",
      ttlMs: 2_000,
      url,
      createBackend: () => new MysqlBackend({ url }),
    },
    {
      fencing: "monotonic",
      fifo: false,
      waiters: "woken",
      watch: false,
      crossProcess: true,
      semaphores: false,
    },
  );
});
