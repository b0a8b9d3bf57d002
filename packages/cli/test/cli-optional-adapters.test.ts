import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { installCommand, loadOptionalAdapter } from "../src/load-adapter.js";
import { UsageError } from "../src/usage-error.js";
import { runMain } from "./support/run-main.js";

const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  dependencies: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
};

describe("adapters with a cloud SDK are optional for the CLI", () => {
  it("@baton/dynamodb and @baton/azure-blob are optional peers, the others dependencies", () => {
    for (const name of ["@baton/dynamodb", "@baton/azure-blob"]) {
      expect(manifest.dependencies[name]).toBeUndefined();
      expect(manifest.peerDependencies?.[name]).toBeDefined();
      expect(manifest.peerDependenciesMeta?.[name]?.optional).toBe(true);
    }
    for (const name of ["@baton/redis", "@baton/etcd", "@baton/zookeeper", "@baton/postgres"]) {
      expect(manifest.dependencies[name]).toBeDefined();
    }
  });

  it("a missing adapter is a usage error that names it and the one command to install it", async () => {
    const missing = "@baton/no-such-adapter";
    let thrown: unknown;
    try {
      await loadOptionalAdapter("nosuch", { name: missing, load: () => import(missing) });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    const message = (thrown as UsageError).message;
    expect(message).toContain(`the nosuch:// backend needs the adapter ${missing}`);
    expect(message).toContain(`npm install --omit=dev --save-prod --prefix `);
    expect(message.trim().endsWith(missing)).toBe(true);
  });

  it("an adapter that fails for another reason is not reported as missing", async () => {
    const broken = new Error("boom");
    await expect(
      loadOptionalAdapter("dynamodb", {
        name: "@baton/dynamodb",
        load: () => Promise.reject(broken),
      }),
    ).rejects.toBe(broken);
  });

  it("installs beside the CLI's own @baton/core", () => {
    expect(installCommand("@baton/dynamodb")).toMatch(
      /^npm install --omit=dev --save-prod --prefix ".+" @baton\/dynamodb$/,
    );
  });

  it("an installed optional adapter loads on demand: its URL options are checked", async () => {
    const { code, err } = await runMain([
      "status",
      "x",
      "--backend",
      "dynamodb://127.0.0.1:1/locks?region=us-east-1&tls=false&no-such-option=1",
    ]);
    expect(code).toBe(EXIT.usage);
    expect(err).toContain("no-such-option");
    expect(err).not.toContain("installed apart");
  });
});
