import { describeBackend } from "@baton/conformance/harness";
import { runConformance } from "@baton/conformance";
import { RedlockBackend } from "../src/index.js";

describeBackend("redlock", (url) => {
  runConformance(
    {
      name: "redlock",
      ttlMs: 1_000,
      url,
      createBackend: () => new RedlockBackend({ url, keyPrefix: "conf:" }),
    },
    { fencing: "none", fifo: false, watch: false, crossProcess: true },
  );
});
