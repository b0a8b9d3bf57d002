/**
 * `@baton/azure-blob`: Baton's Azure Blob Storage backend (a blob lease per lock, a fencing
 * counter in the lock blob's metadata, one heartbeat blob per session). Importing it
 * registers the `azblob://` scheme with `@baton/core`.
 *
 * @packageDocumentation
 * @module @baton/azure-blob
 */
import { registerBackend } from "@baton/core";
import { AZURE_BLOB_GUARANTEES, AzureBlobBackend } from "./azure-blob-backend.js";
import { azureBlobOptionsFromUrl } from "./azure-blob-options.js";

export { AZURE_BLOB_GUARANTEES, AzureBlobBackend, MIN_TTL_MS } from "./azure-blob-backend.js";
export type {
  AzureBlobServiceClientLike,
  AzureBlobSession,
  AzureContainerClientLike,
} from "./azure-blob-clients.js";
export {
  type AzureBlobBackendOptions,
  azureBlobOptionsFromUrl,
  DEFAULT_CREATE_CONTAINER,
  DEFAULT_POLL_MAX_MS,
  DEFAULT_PREFIX,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EMULATOR_ACCOUNT,
  EMULATOR_ACCOUNT_KEY,
} from "./azure-blob-options.js";

// The URL check runs in createCoordinator, before any I/O: a misspelt option fails there.
registerBackend("azblob", (url) => new AzureBlobBackend(azureBlobOptionsFromUrl(url)), {
  checkUrl: azureBlobOptionsFromUrl,
  guarantees: AZURE_BLOB_GUARANTEES,
});
