import { releaseResetTests } from "@baton/conformance/faults";
import { describeBackend } from "@baton/conformance/harness";
import { parseBackendUrl } from "@baton/core";
import { azureBlobOptionsFromUrl } from "../src/azure-blob-options.js";
import { AzureBlobBackend } from "../src/index.js";

describeBackend("azure-blob", (url) => {
  releaseResetTests({
    url,
    createBackend: (u) => new AzureBlobBackend(azureBlobOptionsFromUrl(parseBackendUrl(u))),
  });
});
