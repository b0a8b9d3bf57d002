import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { PostgresBackend } from "../src/index.js";

// The row-lease mode, through PgBouncer in transaction pooling mode.
describeBackend("postgres-lease", (url) => {
  runConformance(
    {
      name: "postgres-lease",
      ttlMs: 1_000,
      url,
      createBackend: () => new PostgresBackend({ url }),
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
