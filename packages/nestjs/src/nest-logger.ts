import type { Logger as BatonLogger } from "@baton/core";
import { Logger } from "@nestjs/common";

/** The logger Baton's background failures are written to: Nest's, with context `Baton`. */
export const nestLogger = new Logger("Baton");

/** Describes what went wrong, for a log line: the stack of an error, or the value. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.stack ?? `${error.name}: ${error.message}`;
  return String(error);
}

/** A Baton `Logger` that writes through Nest's `logger` (stack traces where Nest puts them). */
export function batonLoggerFor(logger: Logger): BatonLogger {
  return {
    debug: (message, details) => logger.debug(withDetails(message, details)),
    warn: (message, details) => logger.warn(withDetails(message, details)),
    error: (message, details) =>
      details instanceof Error
        ? logger.error(message, describeError(details))
        : logger.error(withDetails(message, details)),
  };
}

function withDetails(message: string, details: unknown): string {
  if (details === undefined) return message;
  return `${message}: ${details instanceof Error ? details.message : String(details)}`;
}
