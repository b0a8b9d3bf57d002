/**
 * Minimal logger: `console`, pino, bunyan, winston and anything with `warn` and `error`
 * methods fit, and the error reaches each in the shape it reads. A logger with pino's
 * `bindings()` or bunyan's `fields` is called as `(details, message)`, the details as
 * `{ err: error }` (their error serialiser's key); any other as `(message, error)`, as
 * console takes it.
 */
export interface Logger {
  debug?(message: string, details?: unknown): void;
  warn?(message: string, details?: unknown): void;
  error?(message: string, details?: unknown): void;
}

/**
 * Calls `logger[level]` if present; a logger that throws is ignored, never propagated.
 *
 * Loggers take their arguments in one of two orders, and each keeps the error only in its
 * own: console, winston and most others take `(message, ...details)`; pino and bunyan take
 * `(details, message)` and drop arguments after the message that it has no `%` placeholder
 * for. A logger with pino's `bindings()` or bunyan's `fields` is called as
 * `(details, message)`, the details as `{ err: error }` when they are an error (both
 * libraries' error serialiser reads `err`); any other as `(message, details)`.
 */
export function safeLog(
  logger: Logger | undefined,
  level: keyof Logger,
  message: string,
  details?: unknown,
): void {
  try {
    const log = logger?.[level];
    if (logger === undefined || typeof log !== "function") return;
    if (details === undefined) log.call(logger, message);
    else if (takesDetailsFirst(logger)) log.call(logger, asFields(details) as never, message);
    else log.call(logger, message, details);
  } catch {
    // A broken logger must not break locking.
  }
}

/** Pino (`bindings()`) and bunyan (`fields`) loggers take `(details, message)`. */
function takesDetailsFirst(logger: Logger): boolean {
  const l = logger as { bindings?: unknown; fields?: unknown; child?: unknown };
  if (typeof l.child !== "function") return false;
  return typeof l.bindings === "function" || (typeof l.fields === "object" && l.fields !== null);
}

/** Details as a details-first logger's fields: an error (or any non-object) under `err`. */
function asFields(details: unknown): object {
  if (details instanceof Error || details === null || typeof details !== "object") {
    return { err: details };
  }
  return details;
}
