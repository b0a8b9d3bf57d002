import { ConfigError, createCoordinator } from "@baton/core";
import { loadAdapter } from "../load-adapter.js";

/** The lock the check of a lease length takes and releases at once. */
const CHECK_NAME = "baton-demo/lease-check";

/** The longest lease `baton demo` picks by itself; a store that needs more is told to pass --ttl. */
const MAX_PICKED_MS = 10_000;

/**
 * The lease length `baton demo` uses on the store at `url` when no `--ttl` is given:
 * `preferredMs` (short, so the demo takes seconds), or, on a store that grants leases only in
 * larger steps (etcd: whole seconds, at least 2 s), the next whole second that it grants. The
 * store says so itself: a lease it cannot grant is a `ConfigError` naming `ttlMs`, from
 * `createCoordinator` or from the first lock, which is taken and released here to find out.
 */
export async function demoTtl(url: string, preferredMs: number): Promise<number> {
  await loadAdapter(url);
  let ttlMs = preferredMs;
  for (;;) {
    const refused = await refusal(url, ttlMs);
    if (refused === undefined) return ttlMs;
    const next = (Math.floor(ttlMs / 1_000) + 1) * 1_000;
    if (next > MAX_PICKED_MS) throw refused;
    ttlMs = next;
  }
}

/** The `ConfigError` the store gives for leases of `ttlMs`, or undefined when it grants them. */
async function refusal(url: string, ttlMs: number): Promise<ConfigError | undefined> {
  let coordinator: ReturnType<typeof createCoordinator> | undefined;
  try {
    coordinator = createCoordinator({ url, ttlMs });
    const lock = await coordinator.tryAcquire(CHECK_NAME);
    await lock?.release();
    return undefined;
  } catch (error) {
    if (error instanceof ConfigError && error.field === "ttlMs") return error;
    throw error;
  } finally {
    await coordinator?.close().catch(() => undefined);
  }
}
