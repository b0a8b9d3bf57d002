import {
  BackendUnavailableError,
  createCoordinator,
  type Holder,
  type PermitHolder,
} from "@baton/core";
import { backendFrom, msOption, nameFrom, parse } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import { onSignals } from "../run-child.js";
import { UsageError } from "../usage-error.js";

export const STATUS_USAGE = `usage: baton status NAME [--backend URL] [--watch | --permits] [--json]

Shows who holds NAME: owner, fencing token, value and time left (where the store tells).
A holder that is another library's client (Curator or kazoo on ZooKeeper) is named so, with
the data that client stored.
  --watch     keep printing every change until interrupted
  --permits   show the permits held of the semaphore or read-write lock NAME (what
              baton lock NAME --permits N, --read or --write holds), one line each, in the
              order they were granted
  --json      one JSON object per line:
              {"name","held","owner","token","value","remainingMs","foreign"};
              with --permits, one object:
              {"name","holders":[{"owner","token","permits","mode","value","remainingMs","foreign"}]}`;

/** One line of `baton status`. */
export function formatHolder(name: string, holder: Holder | null, json: boolean): string {
  if (json) {
    return JSON.stringify({
      name,
      held: holder !== null,
      owner: holder?.ownerId ?? null,
      token: holder === null ? null : `${holder.token}`,
      value: holder?.value ?? null,
      remainingMs: holder?.remainingMs ?? null,
      foreign: holder?.foreign ?? null,
    });
  }
  if (holder === null) return `${name}: free`;
  return `${name}: held by ${ownerOf(holder)}, token ${holder.token}${details(holder)}`;
}

/**
 * What `baton status NAME --permits` prints for `holders`: one line per holder, or one JSON
 * object with all of them.
 */
export function formatPermitHolders(
  name: string,
  holders: readonly PermitHolder[],
  json: boolean,
): string {
  if (json) {
    return JSON.stringify({
      name,
      holders: holders.map((h) => ({
        owner: h.ownerId,
        token: `${h.token}`,
        permits: h.permits,
        mode: h.mode,
        value: h.value ?? null,
        remainingMs: h.remainingMs ?? null,
        foreign: h.foreign ?? null,
      })),
    });
  }
  if (holders.length === 0) return `${name}: no permits held`;
  return holders
    .map((h) => {
      const what =
        h.mode === "permit" ? `${h.permits} permit${h.permits === 1 ? "" : "s"}` : `${h.mode} lock`;
      return `${name}: ${what} held by ${ownerOf(h)}, token ${h.token}${details(h)}`;
    })
    .join("\n");
}

/** The value and the time left of a holder, as `baton status` ends its line. */
function details(holder: Holder): string {
  const left =
    // An adapter may give null for "unknown" as well as leave it out.
    holder.remainingMs == null ? "unknown" : `${Math.round(holder.remainingMs)} ms`;
  const value = holder.value === undefined ? "" : `, value ${JSON.stringify(holder.value)}`;
  return `${value}, time left ${left}`;
}

/** The owner as `baton status` prints it: another library's client by name, with its data. */
function ownerOf(holder: Holder): string {
  if (holder.foreign === undefined) return holder.ownerId;
  const data = holder.ownerId === "" ? "(no identifier)" : JSON.stringify(holder.ownerId);
  return `a ${holder.foreign} client ${data}`;
}

/** `baton status`. Resolves with the exit code. */
export async function statusCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals } = parse(argv, {
    backend: { type: "string" },
    ttl: { type: "string" },
    watch: { type: "boolean" },
    json: { type: "boolean" },
    permits: { type: "boolean" },
  });
  if (values.help) {
    out(STATUS_USAGE);
    return 0;
  }
  const permits = values.permits === true;
  if (permits && values.watch) throw new UsageError("--watch and --permits exclude each other");
  if (permits && positionals.length === 2 && /^\d+$/.test(positionals[1] as string)) {
    throw new UsageError(
      "baton status --permits takes no number: it shows every permit held of NAME",
    );
  }
  const name = nameFrom(positionals, STATUS_USAGE);
  const backend = backendFrom(values.backend, process.env);
  const ttlMs = msOption(values.ttl, "ttl", 15_000, 10);
  const json = values.json === true;
  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend, ttlMs });
  try {
    if (permits) {
      // A semaphore and a read-write lock of one name are one permit key: its holders say
      // which they are (mode), so one handle lists either.
      out(formatPermitHolders(name, await coordinator.readWriteLock(name).holders(), json));
      return 0;
    }
    if (!values.watch) {
      out(formatHolder(name, await coordinator.holder(name), json));
      return 0;
    }
    const stop = new AbortController();
    const off = onSignals(() => stop.abort());
    try {
      for await (const holder of coordinator.watch(name, { signal: stop.signal })) {
        out(formatHolder(name, holder, json));
      }
    } finally {
      off();
    }
    return 0;
  } catch (error) {
    if (error instanceof BackendUnavailableError) {
      err(`baton: ${error.message}`);
      return EXIT.unavailable;
    }
    throw error;
  } finally {
    await coordinator.close().catch(() => undefined);
  }
}
