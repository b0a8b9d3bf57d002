import {
  type AcquireOptions,
  type Coordinator,
  type Lock,
  MAX_PERMITS,
  type PermitLimitError,
} from "@baton/core";
import { countOption, usageNaming } from "./args.js";
import { UsageError } from "./usage-error.js";

/**
 * What `baton lock NAME` holds while CMD runs: the plain lock NAME, `take` of the `permits`
 * permits of the semaphore NAME, or the read or the write side of the read-write lock NAME.
 */
export type LockKind =
  | { readonly mode: "lock" }
  | { readonly mode: "permit"; readonly permits: number; readonly take: number }
  | { readonly mode: "read" }
  | { readonly mode: "write" };

/**
 * The kind of hold that `--permits N [--take K]`, `--read` and `--write` ask for (a plain lock
 * without any of them), checked without I/O: a bad number or a combination that means nothing
 * is a `UsageError` naming the flags.
 */
export function lockKindFrom(values: Record<string, unknown>): LockKind {
  const permits = values.permits as string | undefined;
  const take = values.take as string | undefined;
  const read = values.read === true;
  const write = values.write === true;
  if (read && write) throw new UsageError("--read and --write exclude each other");
  const side = read ? "--read" : write ? "--write" : undefined;
  if (side !== undefined && permits !== undefined) {
    throw new UsageError(
      `--permits and ${side} exclude each other: --permits N holds a semaphore, ${side} a read-write lock`,
    );
  }
  if (take !== undefined && permits === undefined) {
    throw new UsageError("--take K needs --permits N (the semaphore's permits in all)");
  }
  if (permits !== undefined) {
    const n = countOption(permits, "permits", 1, 1, MAX_PERMITS);
    return { mode: "permit", permits: n, take: countOption(take, "take", 1, 1, n) };
  }
  if (side !== undefined) return { mode: read ? "read" : "write" };
  return { mode: "lock" };
}

/** Why a try (`--no-wait`) of `kind` of NAME got nothing, for the held exit code's message. */
export function describeHeld(name: string, kind: LockKind): string {
  switch (kind.mode) {
    case "lock":
      return `lock "${name}" is held by someone else`;
    case "permit": {
      const free = kind.take === 1 ? "no free permit" : `fewer than ${kind.take} free permits`;
      return `semaphore "${name}" has ${free} of its ${kind.permits}, or others wait ahead`;
    }
    case "read":
      return `read-write lock "${name}" is held for writing, or a write waits for it`;
    case "write":
      return `read-write lock "${name}" is held by someone else`;
  }
}

/**
 * A `PermitLimitError` (the store holds another number of permits for NAME) as a usage error
 * that names the flag the user typed.
 */
export function limitUsage(error: PermitLimitError, kind: LockKind): UsageError {
  return usageNaming(
    kind.mode === "permit" ? `--permits ${kind.permits}` : `--${kind.mode}`,
    error,
  );
}

/**
 * Acquires `kind` of NAME through `coordinator`: resolves the lock or permit that CMD runs
 * under (a `Permit` is a `Lock`: the same token, signal and release), or rejects as
 * `coordinator.acquire` does.
 */
export function acquireHold(
  coordinator: Coordinator,
  name: string,
  kind: LockKind,
  options: AcquireOptions,
): Promise<Lock> {
  switch (kind.mode) {
    case "lock":
      return coordinator.acquire(name, options);
    case "permit":
      return coordinator
        .semaphore(name, { permits: kind.permits })
        .acquire({ ...options, permits: kind.take });
    case "read":
      return coordinator.readWriteLock(name).read(options);
    case "write":
      return coordinator.readWriteLock(name).write(options);
  }
}
