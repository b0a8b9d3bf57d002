import { MemoryBackend } from "@baton/core";
import { runConformance } from "../src/index.js";

runConformance(
  { name: "memory", ttlMs: 300, createBackend: () => new MemoryBackend() },
  { fencing: "monotonic", fifo: true, watch: true },
);
