import { MemoryBackend } from "@baton/core";
import { describeBackend } from "../src/harness/index.js";
import { runConformance } from "../src/index.js";

describeBackend("memory", () => {
  runConformance(
    { name: "memory", ttlMs: 300, createBackend: () => new MemoryBackend() },
    { fencing: "monotonic", fifo: true, watch: true, semaphores: true, timeLeft: true },
  );
});
