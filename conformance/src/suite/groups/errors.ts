import {
  BackendUnavailableError,
  ConfigError,
  createCoordinator,
  parseBackendUrl,
} from "@baton/core";
import { afterEach, describe, expect, it } from "vitest";
import { spawnLockWorker } from "../../faults/spawn-lock-worker.js";
import { freePorts } from "../../harness/free-port.js";
import { skipUnless } from "../skip-unless.js";
import { delay, type SuiteContext } from "../suite-context.js";

/**
 * Errors say what happened, the same on every backend: a misspelt URL option fails in
 * `createCoordinator`, a store that cannot be reached fails before the wait runs out and
 * names the host (never a credential), and a waiter frozen past its wait and its session
 * gets `LockTimeoutError`.
 */
export function errorsGroup(
  ctx: SuiteContext,
  url: (() => string) | undefined,
  crossProcess: boolean,
): void {
  describe("errors", () => {
    const cleanups: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
    });
    const ttl = ctx.target.ttlMs;

    it("a misspelt URL option fails in createCoordinator, naming the option, before any I/O", () => {
      const base = url?.() ?? "memory://";
      const typo = `${base}${base.includes("?") ? "&" : "?"}prefx=baton`;
      let thrown: unknown;
      try {
        const c = createCoordinator({ url: typo, ttlMs: ttl });
        cleanups.push(() => c.close());
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).field).toBe("url");
      expect((thrown as ConfigError).message).toContain("prefx");
    });

    skipUnless(url !== undefined, `${ctx.target.name}: no URL, so no unreachable address`, () => {
      it("a store that is down fails in a bounded time before the wait runs out, naming the host", async () => {
        const up = (url as () => string)();
        // Ports nothing listens on, one per host the URL names.
        const ports = await freePorts(Math.max(1, parseBackendUrl(up).hosts.length));
        const down = withAddresses(
          up,
          ports.map((p) => `127.0.0.1:${p}`),
        );
        const port = ports[0];
        const c = createCoordinator({ url: down, ttlMs: ttl });
        cleanups.push(() => c.close());
        const waitMs = 60_000;
        const started = performance.now();
        const error = await c.acquire(ctx.name("unreachable"), { waitMs }).then(
          () => expect.unreachable("acquire resolved against a closed port"),
          (e: unknown) => e,
        );
        const elapsed = performance.now() - started;
        expect(error).toBeInstanceOf(BackendUnavailableError);
        const message = (error as Error).message;
        expect(message).toContain(`127.0.0.1:${port}`);
        const password = parseBackendUrl(down).password;
        if (password !== "") expect(message).not.toContain(password);
        expect(elapsed).toBeLessThan(waitMs);
      }, 45_000);
    });

    skipUnless(
      url !== undefined && crossProcess,
      `${ctx.target.name} is not cross-process (the waiter is frozen in a worker process)`,
      () => {
        it("a waiter frozen past its wait and its session gets LockTimeoutError when it wakes", async () => {
          const name = ctx.name("frozen-waiter");
          // The holder shares the worker's URL (and so its key prefix); renewed here all along.
          const holder = createCoordinator({ url: (url as () => string)(), ttlMs: ttl });
          cleanups.push(() => holder.close());
          // The name is free; a wait (not a try, whose budget is one TTL) leaves room for a
          // first connect that is slow on a loaded host.
          await holder.acquire(name, { waitMs: 20_000 });
          const waiter = await spawnLockWorker({ url: (url as () => string)(), ttlMs: ttl });
          cleanups.push(() => waiter.kill());
          // Its session is open before the wait begins: it is frozen while waiting, not while
          // connecting.
          const warm = ctx.name("frozen-waiter-warm");
          waiter.send({ op: "acquire", name: warm, waitMs: 20_000 });
          await waiter.waitFor((e) => e.event === "acquired" && e.name === warm, 20_000);
          const waitMs = 2 * ttl;
          const from = waiter.events.length;
          waiter.send({ op: "acquire", name, waitMs });
          await delay(Math.min(500, ttl / 2));
          waiter.pause();
          await delay(waitMs + 3 * ttl); // past its wait and past its session's lease
          waiter.resume();
          const outcome = await waiter.waitFor(
            (e) => (e.event === "error" && e.op === "acquire") || e.event === "acquired",
            20_000,
            from,
          );
          // LockTimeoutError: the lock stayed held elsewhere all along.
          expect(outcome).toMatchObject({ event: "error", code: "BATON_LOCK_TIMEOUT" });
        }, 60_000);
      },
    );
  });
}

/** `url` with its hosts replaced by `addresses` (user info, path and query kept). */
function withAddresses(url: string, addresses: readonly string[]): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)([^/?]*)(.*)$/i.exec(url);
  if (match === null) throw new Error(`conformance: cannot read the hosts of ${url}`);
  const [, scheme, authority, rest] = match as unknown as [string, string, string, string];
  const at = authority.lastIndexOf("@");
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : "";
  return `${scheme}${userinfo}${addresses.join(",")}${rest}`;
}
