import { RestError } from "@azure/storage-blob";
import { BackendUnavailableError, ConfigError, LockHeldError, parseBackendUrl } from "@baton/core";
import { describe, expect, it } from "vitest";
import { toBatonError } from "../src/azure-blob-errors.js";
import { azureBlobOptionsFromUrl } from "../src/azure-blob-options.js";
import { AzureBlobBackend } from "../src/index.js";

const context =
  'could not acquire "job" (Azure Blob at http://127.0.0.1:10000/devstoreaccount1/locks)';

/** A RestError as the SDK throws it for a reply with `x-ms-error-code`. */
function restError(statusCode: number, errorCode: string): RestError {
  const error = new RestError(`${errorCode}: the message`, { statusCode, code: errorCode });
  (error as unknown as { details: unknown }).details = { errorCode };
  return error;
}

describe("azure-blob error mapping", () => {
  it("refused credentials are a ConfigError naming credentials", () => {
    const mapped = toBatonError(restError(403, "AuthenticationFailed"), context);
    expect(mapped).toBeInstanceOf(ConfigError);
    expect((mapped as ConfigError).field).toBe("credentials");
    expect(mapped.message).toContain("127.0.0.1:10000");
  });

  it("a missing container is a ConfigError naming container", () => {
    const mapped = toBatonError(restError(404, "ContainerNotFound"), context);
    expect(mapped).toBeInstanceOf(ConfigError);
    expect((mapped as ConfigError).field).toBe("container");
  });

  it("network failures, throttling and server errors are BackendUnavailableError, never held", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:10000"), {
      code: "ECONNREFUSED",
    });
    for (const error of [refused, restError(503, "ServerBusy"), restError(500, "InternalError")]) {
      const mapped = toBatonError(error, context);
      expect(mapped).toBeInstanceOf(BackendUnavailableError);
      expect(mapped.message).toContain(context);
      expect(mapped.cause).toBe(error);
    }
  });

  it("Baton's own errors pass through unchanged", () => {
    const held = new LockHeldError("job");
    expect(toBatonError(held, context)).toBe(held);
  });
});

describe("azure-blob options", () => {
  const fromUrl = (url: string) => azureBlobOptionsFromUrl(parseBackendUrl(url));

  it("a path-style URL with a port is the emulator's endpoint, over http on loopback", () => {
    expect(fromUrl("azblob://devstoreaccount1@127.0.0.1:10000/locks?prefix=app/")).toEqual({
      endpoint: "http://127.0.0.1:10000/devstoreaccount1",
      container: "locks",
      accountName: "devstoreaccount1",
      prefix: "app/",
    });
  });

  it("an account URL is the account's endpoint in Azure, over https, with its key", () => {
    expect(fromUrl("azblob://myaccount/locks?key=abc%2Bd%2F%3D%3D")).toEqual({
      endpoint: "https://myaccount.blob.core.windows.net",
      container: "locks",
      accountName: "myaccount",
      accountKey: "abc+d/==",
    });
  });

  it("bad URLs and options are ConfigErrors before any I/O", () => {
    expect(() => fromUrl("azblob://acct/locks?prefx=a")).toThrow(/prefx/);
    expect(() => fromUrl("azblob://acct")).toThrow(ConfigError);
    expect(() => fromUrl("azblob://acct@h:1/a/b")).toThrow(ConfigError);
    expect(() => fromUrl("azblob://h:10000/locks")).toThrow(/name the account/);
    expect(
      () =>
        new AzureBlobBackend({ endpoint: "http://h", accountName: "acct", container: "Bad_Name" }),
    ).toThrow(/container/);
    expect(
      () => new AzureBlobBackend({ endpoint: "http://h", accountName: "acct", container: "locks" }),
    ).toThrow(/accountKey/);
    expect(() => new AzureBlobBackend({ container: "locks" } as never)).toThrow(/exactly one/);
  });

  it("a TTL below the minimum is a ConfigError naming ttlMs", async () => {
    const backend = new AzureBlobBackend(fromUrl("azblob://devstoreaccount1@127.0.0.1:1/locks"));
    const error = await backend.openSession({ ttlMs: 500, ownerId: "a" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe("ttlMs");
    await backend.close();
  });
});
