import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { RedlockBackend } from "../src/index.js";

// The election group is skipped by declaration: election terms are fencing tokens, and
// Redlock's are all 0n (fencing "none"), so "a later term is greater" cannot hold.
describeBackend("redlock", (url) => {
  runConformance(
    {
      name: "redlock",
      ttlMs: 1_000,
      url,
      // The default key prefix, as in the worker processes, which are given the URL only: an
      // operator in this process inspects and force-releases their locks.
      createBackend: () => new RedlockBackend({ url }),
    },
    {
      fencing: "none",
      fifo: false,
      watch: false,
      crossProcess: true,
      semaphores: false,
      timeLeft: true,
    },
  );
});
