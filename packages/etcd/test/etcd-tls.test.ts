import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeBackend, findEtcdBinaries, freePorts } from "@baton/conformance/harness";
import { BackendUnavailableError, createBackend, createCoordinator } from "@baton/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import "../src/index.js";

/** A one-member etcd serving clients over TLS only, with a self-signed certificate for 127.0.0.1. */
describeBackend("etcd", () => {
  describe("etcd over TLS (private server)", () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-etcd-tls-"));
    const cert = join(dir, "server.pem");
    const key = join(dir, "server-key.pem");
    let server: ChildProcess | undefined;
    let port = 0;

    beforeAll(async () => {
      const found = findEtcdBinaries();
      if (!found.ok) throw new Error(found.reason);
      execFileSync(
        "openssl",
        [
          "req",
          "-x509",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:prime256v1",
          "-nodes",
          "-days",
          "1",
          "-subj",
          "/CN=127.0.0.1",
          "-addext",
          "subjectAltName=IP:127.0.0.1",
          "-keyout",
          key,
          "-out",
          cert,
        ],
        { stdio: "ignore" },
      );
      const [client, peer] = (await freePorts(2)) as [number, number];
      port = client;
      server = spawn(
        found.value.etcd,
        [
          "--name=tls",
          `--data-dir=${join(dir, "data")}`,
          `--listen-client-urls=https://127.0.0.1:${client}`,
          `--advertise-client-urls=https://127.0.0.1:${client}`,
          `--listen-peer-urls=http://127.0.0.1:${peer}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
          `--initial-cluster=tls=http://127.0.0.1:${peer}`,
          `--cert-file=${cert}`,
          `--key-file=${key}`,
        ],
        { stdio: "ignore" },
      );
      // Ready once a TLS client gets a session.
      const until = performance.now() + 30_000;
      for (;;) {
        const backend = await createBackend(
          `etcd://127.0.0.1:${port}?ca=${encodeURIComponent(cert)}&requestTimeoutMs=1000`,
        );
        try {
          await (await backend.openSession({ ttlMs: 5_000, ownerId: "probe" })).close();
          break;
        } catch (error) {
          if (performance.now() > until) throw error;
          await new Promise((r) => setTimeout(r, 200));
        } finally {
          await backend.close();
        }
      }
    }, 40_000);

    afterAll(() => {
      server?.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    });

    it("?ca= connects over TLS, checking the server against that CA", async () => {
      const url = `etcd://127.0.0.1:${port}?ca=${encodeURIComponent(cert)}`;
      const a = createCoordinator({ url, ttlMs: 5_000 });
      const b = createCoordinator({ url, ttlMs: 5_000 });
      try {
        const lock = await a.acquire("tls-job");
        expect(await b.tryAcquire("tls-job")).toBeNull();
        expect(await b.holder("tls-job")).toMatchObject({ ownerId: a.ownerId, token: lock.token });
        await lock.release();
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    it("without TLS, or with ?tls=true and a certificate Node does not trust, no session opens", async () => {
      for (const url of [
        `etcd://127.0.0.1:${port}?requestTimeoutMs=1000`,
        `etcd://127.0.0.1:${port}?tls=true&requestTimeoutMs=1000`,
      ]) {
        const backend = await createBackend(url);
        const error = await backend
          .openSession({ ttlMs: 5_000, ownerId: "x" })
          .catch((e: unknown) => e);
        await backend.close();
        expect(error, url).toBeInstanceOf(BackendUnavailableError);
      }
    });
  });
});
