import { BlobServiceClient, ContainerClient } from "@azure/storage-blob";
import { describe, expect, it } from "vitest";
import {
  AzureBlobBackend,
  type AzureBlobServiceClientLike,
  type AzureContainerClientLike,
  EMULATOR_ACCOUNT,
} from "../src/index.js";

const endpoint = `http://127.0.0.1:1/${EMULATOR_ACCOUNT}`;

describe("azure blob client shape", () => {
  it("the Azure SDK's ContainerClient and BlobServiceClient have the shapes the options take", async () => {
    const container = new ContainerClient(`${endpoint}/locks?sv=2020-01-01&sig=secret`);
    const service = new BlobServiceClient(endpoint);
    // Compile-time checks: the SDK's clients are assignable where Baton takes a client.
    const containerLike: AzureContainerClientLike = container;
    const serviceLike: AzureBlobServiceClientLike = service;
    const a = new AzureBlobBackend({ containerClient: container });
    const b = new AzureBlobBackend({ serviceClient: service, container: "locks" });
    expect(a.containerClient).toBe(containerLike);
    expect(b.containerClient.url).toBe(serviceLike.getContainerClient("locks").url);
    await Promise.all([a.close(), b.close()]);
  });

  it("refuses a service client whose getContainerClient gives no container client", () => {
    expect(
      () =>
        new AzureBlobBackend({
          serviceClient: { getContainerClient: () => ({}) as AzureContainerClientLike },
          container: "locks",
        }),
    ).toThrow(/serviceClient/);
  });
});
