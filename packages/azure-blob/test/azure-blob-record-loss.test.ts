import { runRecordLoss } from "@baton/conformance";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { recordBlobName } from "../src/azure-blob-keys.js";
import { azureBlobOptionsFromUrl, resolveAzureBlobOptions } from "../src/azure-blob-options.js";
import { AzureBlobBackend } from "../src/index.js";

describeBackend("azure-blob", (url) => {
  const admin = resolveAzureBlobOptions(azureBlobOptionsFromUrl(parseBackendUrl(url)));
  runRecordLoss({
    name: "azure-blob",
    ttlMs: 1_500,
    url,
    createBackend: () => new AzureBlobBackend(azureBlobOptionsFromUrl(parseBackendUrl(url))),
    deleteRecord: async (key) => {
      const blob = admin.container.getBlockBlobClient(recordBlobName(admin.prefix, key)) as {
        delete(): Promise<unknown>;
      };
      await blob.delete();
    },
  });
});
