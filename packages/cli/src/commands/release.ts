import { createInterface } from "node:readline/promises";
import { ConfigError, type ForceReleaseResult } from "@baton/core";
import { backendFrom, nameFrom, parse, usageFromConfig } from "../args.js";
import { EXIT } from "../exit-codes.js";
import type { Inspection } from "../inspect/inspection-source.js";
import { openSource } from "../inspect/open-source.js";
import { formatDuration, holderName } from "../inspect/rows.js";
import { UsageError } from "../usage-error.js";

export const RELEASE_USAGE = `usage: baton release NAME --force --reason TEXT [--yes] [--kind KIND] [--token T]
       [--backend URL]

Frees NAME at the store whoever holds it, for a holder that is stuck or gone. The next
waiter gets it at once; the holder learns it at its next renewal: its lock's signal aborts
with a LockLostError of reason "revoked" carrying TEXT (baton lock stops its CMD, exit 76).
A store that cannot free one grant of a live session ends the holder's whole session.
  --force        required: says you mean to take a lock away from its holder
  --reason TEXT  required: why, told to the holder and logged
  --yes          do not ask; without it baton asks on the terminal, and refuses (exit 64)
                 when stdin is not a terminal
  --kind KIND    which of the names NAME to free when several kinds share it: lock,
                 election, semaphore, read-write-lock, or job (the lock of its running slot;
                 its attempt is then recorded failed and retried)
  --token T      free only the grant with fencing token T (a later grant is left alone);
                 needed for a semaphore held by several grants

Exit codes: 0 released; 84 nothing to release (NAME is free, or T is no longer held);
85 the backend cannot force-release; 64 bad usage (or the question was declined);
69 the store could not be reached.`;

/** The kinds a forced release takes. */
const KINDS = ["lock", "election", "semaphore", "read-write-lock", "job"] as const;
type ReleaseKind = (typeof KINDS)[number];

/** True when `error` says the backend has no forced release (its guarantees lack it). */
export function isUnsupported(error: unknown): boolean {
  return (
    error instanceof ConfigError &&
    error.field === "backend" &&
    error.message.includes("cannot force-release")
  );
}

/** What is about to be released, as the question shows it. */
function describe(items: readonly Inspection[]): string {
  if (items.length === 0) return "the store lists no holder of that name now";
  return items
    .map((item) => {
      const holders = item.holders
        .map(
          (h) =>
            `${holderName(h)}${h.token === undefined ? "" : ` (token ${h.token})`}${h.heldMs === undefined ? "" : `, held ${formatDuration(h.heldMs)}`}`,
        )
        .join("; ");
      return `${item.kind} "${item.name}": ${holders || "no holder"}, ${item.waiters?.count ?? 0} waiting`;
    })
    .join("\n");
}

/** `baton release`. Resolves with the exit code. */
export async function releaseCommand(
  argv: readonly string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values, positionals } = parse(argv, {
    backend: { type: "string" },
    force: { type: "boolean" },
    reason: { type: "string" },
    yes: { type: "boolean", short: "y" },
    kind: { type: "string" },
    token: { type: "string" },
  });
  if (values.help) {
    out(RELEASE_USAGE);
    return 0;
  }
  const name = nameFrom(positionals, RELEASE_USAGE);
  if (values.force !== true) {
    throw new UsageError(
      "baton release takes a lock away from its holder: pass --force to say you mean it",
    );
  }
  const reason = typeof values.reason === "string" ? values.reason.trim() : "";
  if (reason === "") throw new UsageError("--reason TEXT is required: say why, for the holder");
  const kind = values.kind as ReleaseKind | undefined;
  if (kind !== undefined && !KINDS.includes(kind)) {
    throw new UsageError(`--kind must be one of ${KINDS.join(", ")}, got "${kind}"`);
  }
  const tokenText = values.token as string | undefined;
  if (tokenText !== undefined && !/^\d+$/.test(tokenText)) {
    throw new UsageError(`--token must be a decimal fencing token, got "${tokenText}"`);
  }
  const interactive = values.yes !== true;
  if (interactive && process.stdin.isTTY !== true) {
    throw new UsageError("stdin is not a terminal to ask on: pass --yes to release without asking");
  }
  const backend = backendFrom(values.backend, process.env);
  const { source, coordinator } = await openSource(backend);
  try {
    if (interactive) {
      const held: Inspection[] = [];
      for await (const item of source.list({ prefix: name })) {
        if (item.name === name && (kind === undefined || item.kind === kind)) held.push(item);
      }
      // A store may list a grant only some time after it was made (PostgreSQL: from the
      // holder's first renewal), so an empty list still asks; the release itself decides.
      err(describe(held));
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      const answer = await rl.question(`Force-release "${name}"? Type yes to go on: `);
      rl.close();
      if (answer.trim().toLowerCase() !== "yes") {
        err("baton: not released");
        return EXIT.usage;
      }
    }
    const options = {
      reason,
      ...(kind === undefined ? {} : { kind }),
      ...(tokenText === undefined ? {} : { token: BigInt(tokenText) }),
    };
    let result: ForceReleaseResult;
    try {
      result = await source.forceRelease(name, options);
    } catch (error) {
      if (isUnsupported(error)) {
        err(`baton: ${(error as Error).message}`);
        return EXIT.cannotForceRelease;
      }
      if (error instanceof ConfigError) throw usageFromConfig(error);
      throw error;
    }
    if (!result.released) {
      err(
        `baton: nothing to release: "${name}" is not held${tokenText ? ` with token ${tokenText}` : ""}`,
      );
      return EXIT.nothingToRelease;
    }
    const token = result.token === undefined ? "" : ` token ${result.token}`;
    const holder = result.holder === undefined ? "" : ` held by ${result.holder.ownerId}`;
    const scope = result.scope === "session" ? " (the holder's whole session was ended)" : "";
    out(
      `released ${result.space === "lock" ? "" : "permit of "}"${name}"${token}${holder}${scope}: ${reason}`,
    );
    return 0;
  } finally {
    await coordinator.close().catch(() => undefined);
  }
}
