import "@baton/azure-blob";
import "@baton/dynamodb";
import "@baton/etcd";
import "@baton/mysql";
import "@baton/postgres";
import "@baton/redis";
import "@baton/zookeeper";
import { ALL_BACKENDS, describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Inspection } from "@baton/core";
import { afterEach, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";

/** What `baton ls --json` prints of an item, and what the same item of `list()` compares as. */
interface Row {
  readonly kind: string;
  readonly name: string;
  readonly holders: readonly { readonly ownerId: string; readonly token?: string }[];
}

function rowOf(item: Inspection): Row {
  return {
    kind: item.kind,
    name: item.name,
    holders: item.holders.map((h) => ({
      ownerId: h.ownerId,
      ...(h.token === undefined ? {} : { token: `${h.token}` }),
    })),
  };
}

const byName = (a: Row, b: Row) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

// The embedded memory backend lives in one process: another process lists nothing of it.
for (const kind of ALL_BACKENDS.filter((k) => k !== "memory")) {
  describeBackend(kind, (url) => {
    const run = useBatonRuns();
    const coordinators: Coordinator[] = [];
    afterEach(async () => {
      await Promise.all(coordinators.splice(0).map((c) => c.close().catch(() => undefined)));
    });

    it("baton ls --json lists what the coordinator's list() lists", async () => {
      const holder = createCoordinator({ url, ttlMs: 3_000, ownerId: "ls-holder" });
      coordinators.push(holder);
      const p = `cli-ls-${Math.random().toString(36).slice(2, 10)}/`;
      const locks = await Promise.all(["a", "b"].map((n) => holder.acquire(`${p}${n}`)));
      const guarantees = (await holder.backend()).guarantees;
      if (guarantees.inspection !== true) {
        // A store that cannot list its locks says so, as a usage error: never an empty list.
        const r = run(["ls", p, "--json", "--backend", url]);
        expect(await r.exited).toBe(EXIT.usage);
        expect(r.output()).toContain("cannot list or inspect its keys");
        return;
      }
      if (guarantees.semaphores) {
        await holder.semaphore(`${p}pool`, { permits: 2 }).acquire();
      }
      const expected = async () => {
        const items: Row[] = [];
        for await (const item of holder.list({ prefix: p })) items.push(rowOf(item));
        return items.sort(byName);
      };
      let printed: Row[] = [];
      let listed: Row[] = [];
      // Some stores list a lock from its holder's first renewal on (a third of the TTL).
      await until(
        async () => {
          const r = run(["ls", p, "--json", "--backend", url]);
          const code = await r.exited;
          if (code !== 0) throw new Error(`baton ls exited ${code}: ${r.output()}`);
          printed = r
            .output()
            .trim()
            .split("\n")
            // Output holds stderr too (a driver's warning, e.g. the AWS SDK's about Node 20).
            .filter((line) => line.startsWith("{"))
            .map((line) => rowOf(JSON.parse(line) as Inspection))
            .sort(byName);
          listed = await expected();
          return printed.length === locks.length + (guarantees.semaphores ? 1 : 0);
        },
        30_000,
        "baton ls to list every lock",
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; printed ${JSON.stringify(printed)}`);
      });
      expect(printed).toEqual(listed);
      expect(printed.map((r) => r.name)).toEqual(
        [`${p}a`, `${p}b`, ...(guarantees.semaphores ? [`${p}pool`] : [])].sort(),
      );
      for (const row of printed) expect(row.holders[0]?.ownerId).toBe("ls-holder");
    }, 60_000);
  });
}
