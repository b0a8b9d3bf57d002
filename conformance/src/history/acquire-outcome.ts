/**
 * How a failed acquire goes into a history: definitely not granted (`fail`) only when the
 * store answered "held by someone else" or the input was rejected before any I/O; anything
 * else (a wait that ran out, an unreachable store, a cancelled call, a lost session) is
 * `unknown`, because the store may have granted the lock before the caller gave up.
 *
 * @param code - the error's `code` (e.g. `BATON_LOCK_HELD`) or name
 * @param message - the error's message, kept as the reason
 */
export function acquireFailure(
  code: string,
  message: string,
): { status: "fail" | "unknown"; reason: string } {
  const reason = `${code}: ${message}`;
  if (code === "BATON_LOCK_HELD" || code === "BATON_CONFIG") return { status: "fail", reason };
  return { status: "unknown", reason };
}

/** {@link acquireFailure} for a thrown error. */
export function acquireFailureOf(error: unknown): { status: "fail" | "unknown"; reason: string } {
  const e = error as { code?: unknown; name?: unknown; message?: unknown } | undefined;
  const code =
    typeof e?.code === "string" ? e.code : typeof e?.name === "string" ? e.name : "Error";
  const message = typeof e?.message === "string" ? e.message : String(error);
  return acquireFailure(code, message);
}
