import { randomUUID } from "node:crypto";
import { describeBackend } from "@baton/conformance/harness";
import { ConfigError, parseBackendUrl } from "@baton/core";
import { expect, it } from "vitest";
import { azureBlobOptionsFromUrl } from "../src/azure-blob-options.js";
import { AzureBlobBackend } from "../src/index.js";

describeBackend("azure-blob", (url) => {
  /** The harness's URL with another container, one no test has used. */
  const freshContainer = (extra = "") => {
    return `${url.replace(/\/[^/?]+(\?|$)/, `/c${randomUUID().slice(0, 8)}$1`)}${extra}`;
  };

  it("a missing container is created on first use", async () => {
    const backend = new AzureBlobBackend(
      azureBlobOptionsFromUrl(parseBackendUrl(freshContainer())),
    );
    try {
      const session = await backend.openSession({ ttlMs: 2_000, ownerId: "a" });
      const grant = await session.acquire("job", {
        wait: false,
        signal: new AbortController().signal,
      });
      expect(grant?.token).toBe(1n);
      await session.close();
    } finally {
      await backend.close();
    }
  });

  it("with createContainer=false a missing container is a ConfigError naming it, at once", async () => {
    const backend = new AzureBlobBackend(
      azureBlobOptionsFromUrl(parseBackendUrl(freshContainer("?createContainer=false"))),
    );
    try {
      const error = await backend
        .openSession({ ttlMs: 2_000, ownerId: "a" })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe("container");
    } finally {
      await backend.close();
    }
  });
});
