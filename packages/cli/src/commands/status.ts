import { BackendUnavailableError, createCoordinator, type Holder } from "@baton/core";
import { backendFrom, msOption, nameFrom, parse } from "../args.js";
import { EXIT } from "../exit-codes.js";
import { loadAdapter } from "../load-adapter.js";
import { onSignals } from "../run-child.js";

export const STATUS_USAGE = `usage: baton status NAME [--backend URL] [--watch] [--json]

Shows who holds NAME: owner, fencing token, value and time left (where the store tells).
A holder that is another library's client (Curator or kazoo on ZooKeeper) is named so, with
the data that client stored.
  --watch   keep printing every change until interrupted
  --json    one JSON object per line:
            {"name","held","owner","token","value","remainingMs","foreign"}`;

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
  const left =
    holder.remainingMs === undefined ? "unknown" : `${Math.round(holder.remainingMs)} ms`;
  const value = holder.value === undefined ? "" : `, value ${JSON.stringify(holder.value)}`;
  return `${name}: held by ${ownerOf(holder)}, token ${holder.token}${value}, time left ${left}`;
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
  });
  if (values.help) {
    out(STATUS_USAGE);
    return 0;
  }
  const name = nameFrom(positionals, STATUS_USAGE);
  const backend = backendFrom(values.backend, process.env);
  const ttlMs = msOption(values.ttl, "ttl", 15_000, 10);
  const json = values.json === true;
  await loadAdapter(backend);
  const coordinator = createCoordinator({ url: backend, ttlMs });
  try {
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
