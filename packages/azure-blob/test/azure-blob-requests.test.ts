import { randomUUID } from "node:crypto";
import {
  ContainerClient,
  newPipeline,
  type RequestPolicy,
  type RequestPolicyFactory,
  StorageSharedKeyCredential,
  type WebResource,
} from "@azure/storage-blob";
import { describeBackend } from "@baton/conformance/harness";
import { createCoordinator, parseBackendUrl } from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import {
  azureBlobOptionsFromUrl,
  EMULATOR_ACCOUNT,
  EMULATOR_ACCOUNT_KEY,
} from "../src/azure-blob-options.js";
import { AzureBlobBackend } from "../src/index.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeBackend("azure-blob", (url) => {
  // Read in the tests: this body also runs, with an empty URL, when the backend is skipped.
  const options = () => azureBlobOptionsFromUrl(parseBackendUrl(url));
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
  });

  /**
   * A container client on the harness's Azurite that lists every request it sends, as
   * `METHOD <blob name>?comp=<operation>` (the blob name after the container).
   */
  const countingClient = () => {
    const sent: string[] = [];
    const counting: RequestPolicyFactory = {
      create: (next: RequestPolicy): RequestPolicy => ({
        sendRequest: (request: WebResource) => {
          const at = new URL(request.url);
          const blob = decodeURIComponent(at.pathname).split("/").slice(3).join("/");
          const comp = at.searchParams.get("comp");
          sent.push(`${request.method} ${blob}${comp === null ? "" : `?comp=${comp}`}`);
          return next.sendRequest(request);
        },
      }),
    };
    const pipeline = newPipeline(
      new StorageSharedKeyCredential(EMULATOR_ACCOUNT, EMULATOR_ACCOUNT_KEY),
      { retryOptions: { maxTries: 1 } },
    );
    pipeline.factories.push(counting);
    const { endpoint, container } = options();
    const client = new ContainerClient(`${endpoint}/${container}`, pipeline);
    return { client, sent };
  };
  const backendOn = (client: ContainerClient) => {
    const backend = new AzureBlobBackend({ containerClient: client, prefix: `${randomUUID()}/` });
    cleanups.push(() => backend.close());
    return backend;
  };

  describe("azure-blob requests", () => {
    it("a coordinator holding 200 locks renews them all with one request per interval: its heartbeat's metadata", async () => {
      const { client, sent } = countingClient();
      const backend = backendOn(client);
      const coordinator = createCoordinator({ backend, ttlMs: 1_500 });
      cleanups.push(() => coordinator.close());
      // Renewals sent: confirmed ones, and any that failed on a loaded machine.
      let renewals = 0;
      coordinator.on("renewed", (event) => {
        if (event.locks === 200) renewals++;
      });
      coordinator.on("renewFailed", () => {
        renewals++;
      });
      const names = Array.from({ length: 200 }, (_, i) => `held-${i}`);
      for (let i = 0; i < names.length; i += 20) {
        await Promise.all(names.slice(i, i + 20).map((name) => coordinator.acquire(name)));
      }
      // The count starts after a renewal has settled, so none is half inside the window.
      const settled = () =>
        new Promise<void>((resolve) => {
          const off = coordinator.on("renewed", () => {
            off();
            resolve();
          });
        });
      await settled();
      sent.length = 0;
      renewals = 0;
      await sleep(2_000); // four intervals of 500 ms
      await settled();
      const count = renewals;
      const during = sent.splice(0, sent.length);
      expect(count).toBeGreaterThanOrEqual(1);
      const heartbeat = /^PUT [^ ]*sessions\/[^ ]+\?comp=metadata$/;
      expect(during.filter((r) => !heartbeat.test(r))).toEqual([]);
      expect(new Set(during).size).toBe(1); // one session's heartbeat
      expect(during).toHaveLength(count);
    });

    it("a waiter in another process reads the held lock a few times a second and writes nothing", async () => {
      const name = `waited-${randomUUID().slice(0, 8)}`;
      const prefix = `${randomUUID()}/`;
      // The holder is another backend: no release in it would wake the waiter.
      const holderBackend = new AzureBlobBackend({ ...options(), prefix });
      cleanups.push(() => holderBackend.close());
      const holder = createCoordinator({ backend: holderBackend, ttlMs: 1_500 });
      cleanups.push(() => holder.close());
      await holder.acquire(name);
      const { client, sent } = countingClient();
      const backend = new AzureBlobBackend({ containerClient: client, prefix });
      cleanups.push(() => backend.close());
      const waiter = createCoordinator({ backend, ttlMs: 1_500 });
      cleanups.push(() => waiter.close());
      await waiter.holder(name); // session open
      sent.length = 0;
      const waitMs = 3_000;
      await expect(waiter.acquire(name, { waitMs })).rejects.toThrow(/LockTimeout|within/);
      const lock = `${prefix}locks/${name}`;
      const looks = sent.filter((r) => r === `HEAD ${lock}`).length;
      const writes = sent.filter((r) => r.startsWith("PUT") && r.includes("locks/"));
      const heartbeats = sent.filter((r) => r.startsWith("HEAD") && r.includes("sessions/"));
      expect(writes).toEqual([]);
      // Pauses back off from 25-50 ms to 250-500 ms; the holder's heartbeat is read about
      // once per TTL.
      expect(looks).toBeGreaterThanOrEqual(3);
      expect(looks).toBeLessThanOrEqual(Math.ceil(waitMs / 125));
      expect(heartbeats.length).toBeLessThanOrEqual(Math.ceil(waitMs / 1_500) + 1);
    });
  });
});
