import type { BackendSession } from "@baton/core";

/**
 * What the Azure Blob backend needs from a container client you pass as
 * {@link AzureBlobBackendOptions.containerClient}: a `ContainerClient` of
 * `@azure/storage-blob` (version 12) has this shape. It is described by shape, so that
 * Baton's published types never load the Azure SDK's: a release of the SDK whose own
 * declarations break cannot break your build through Baton.
 *
 * The backend never closes or deletes a client or container you pass.
 */
export interface AzureContainerClientLike {
  /** The container's URL (with a SAS token, if any: the backend never prints the query). */
  readonly url: string;
  /**
   * A client of one block blob of the container: the SDK's `BlockBlobClient`, whose
   * `getProperties`, `download`, `upload`, `setMetadata`, `delete` and `getBlobLeaseClient`
   * the backend calls.
   */
  getBlockBlobClient(blobName: string): object;
  /**
   * Lists the container's blobs by name prefix, a page at a time (the SDK's paged iterator):
   * what `coordinator.list()` reads.
   */
  listBlobsFlat(options?: { prefix?: string; abortSignal?: AbortSignal }): object;
  /** Creates the container when it is missing (with `createContainer`, the default). */
  createIfNotExists(options?: { abortSignal?: AbortSignal }): Promise<unknown>;
}

/**
 * What the Azure Blob backend needs from a service client you pass as
 * {@link AzureBlobBackendOptions.serviceClient}: a `BlobServiceClient` of
 * `@azure/storage-blob` has this shape.
 */
export interface AzureBlobServiceClientLike {
  /** The client of the container named {@link AzureBlobBackendOptions.container}. */
  getContainerClient(containerName: string): AzureContainerClientLike;
}

/** A session of the Azure Blob backend: one heartbeat blob, renewed once per interval. */
export interface AzureBlobSession extends BackendSession {
  /** The session's id (random): its heartbeat blob's name and the lease id of its locks. */
  readonly sessionId: string;
}
