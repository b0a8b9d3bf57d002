import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { PostgresBackend } from "../src/index.js";

describeBackend("postgres", (url) => {
  runConformance(
    {
      name: "postgres",
      ttlMs: 1_000,
      url,
      createBackend: () => new PostgresBackend({ url }),
    },
    {
      fencing: "monotonic",
      fifo: false,
      waiters: "woken",
      watch: true,
      crossProcess: true,
      semaphores: true,
      timeLeft: true,
    },
  );
});
