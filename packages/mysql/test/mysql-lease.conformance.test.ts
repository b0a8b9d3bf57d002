import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { MysqlBackend } from "../src/index.js";

// The row-lease mode: a row per session with an expiry on the server's clock, polling waits.
describeBackend("mysql-lease", (url) => {
  runConformance(
    {
      name: "mysql-lease",
      ttlMs: 1_000,
      url,
      createBackend: () => new MysqlBackend({ url }),
    },
    {
      fencing: "monotonic",
      fifo: false,
      waiters: "poll-resets",
      watch: false,
      crossProcess: true,
      semaphores: false,
      timeLeft: true,
    },
  );
});
