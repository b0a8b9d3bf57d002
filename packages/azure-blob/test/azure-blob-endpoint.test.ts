import { BlobServiceClient, ContainerClient } from "@azure/storage-blob";
import { createBackend } from "@baton/core";
import { describe, expect, it } from "vitest";
import { AzureBlobBackend, EMULATOR_ACCOUNT, EMULATOR_ACCOUNT_KEY } from "../src/index.js";

// The Azure SDK sends nothing until the first call: none of these tests connects.

const KEY = Buffer.from("not-a-real-account-key-0123456789").toString("base64");

function expectNoSecret(endpoint: string | undefined): void {
  for (const secret of [KEY, EMULATOR_ACCOUNT_KEY, "sig=", "s3cr3t", "AccountKey"]) {
    expect(endpoint).not.toContain(secret);
  }
}

describe("azure blob endpoint (no server)", () => {
  it("is the account's host for a connection string with an AccountKey", async () => {
    const backend = new AzureBlobBackend({
      connectionString: `DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey=${KEY};EndpointSuffix=core.windows.net`,
      container: "locks",
    });
    try {
      expect(backend.endpoint).toBe("myaccount.blob.core.windows.net");
      expectNoSecret(backend.endpoint);
    } finally {
      await backend.close();
    }
  });

  it("is the emulator's host:port for a path-style connection string", async () => {
    const backend = new AzureBlobBackend({
      connectionString: `DefaultEndpointsProtocol=http;AccountName=${EMULATOR_ACCOUNT};AccountKey=${EMULATOR_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:10000/${EMULATOR_ACCOUNT};`,
      container: "locks",
    });
    try {
      expect(backend.endpoint).toBe("127.0.0.1:10000");
      expectNoSecret(backend.endpoint);
    } finally {
      await backend.close();
    }
  });

  it("leaves out an azblob:// URL's key, given as the password or in ?key=", async () => {
    const asPassword = await createBackend(
      `azblob://${EMULATOR_ACCOUNT}:${encodeURIComponent(KEY)}@127.0.0.1:10001/locks`,
    );
    const inQuery = await createBackend(`azblob://myaccount/locks?key=${encodeURIComponent(KEY)}`);
    try {
      expect(asPassword.endpoint).toBe("127.0.0.1:10001");
      expect(inQuery.endpoint).toBe("myaccount.blob.core.windows.net");
      expectNoSecret(asPassword.endpoint);
      expectNoSecret(inQuery.endpoint);
    } finally {
      await asPassword.close();
      await inQuery.close();
    }
  });

  it("leaves out a SAS token, given as an option or on a client's URL", async () => {
    const withSas = new AzureBlobBackend({
      endpoint: "https://myaccount.blob.core.windows.net",
      container: "locks",
      sasToken: "?sv=2022-11-02&sig=s3cr3t",
    });
    const client = new ContainerClient(
      "https://other.blob.core.windows.net/locks?sv=2022-11-02&sig=s3cr3t",
    );
    const given = new AzureBlobBackend({ containerClient: client });
    const service = new AzureBlobBackend({
      serviceClient: new BlobServiceClient("http://[::1]:10002/devstoreaccount1?sig=s3cr3t"),
      container: "locks",
    });
    try {
      expect(withSas.endpoint).toBe("myaccount.blob.core.windows.net");
      expect(given.endpoint).toBe("other.blob.core.windows.net");
      expect(service.endpoint).toBe("[::1]:10002");
      for (const b of [withSas, given, service]) expectNoSecret(b.endpoint);
    } finally {
      await withSas.close();
      await given.close();
      await service.close();
    }
  });
});
