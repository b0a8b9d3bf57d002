import { runConformance } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { azureBlobOptionsFromUrl } from "../src/azure-blob-options.js";
import { AzureBlobBackend } from "../src/index.js";

describeBackend("azure-blob", (url) => {
  runConformance(
    {
      name: "azure-blob",
      ttlMs: 1_500,
      url,
      createBackend: () => new AzureBlobBackend(azureBlobOptionsFromUrl(parseBackendUrl(url))),
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
