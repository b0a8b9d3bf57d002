import { parseArgs } from "node:util";
import { ConfigError, parseBackendUrl } from "@baton/core";
import { UsageError } from "./usage-error.js";

/** Options every command that talks to a store takes. */
export interface BackendArgs {
  /** The backend URL (from `--backend` or `BATON_BACKEND`). */
  readonly backend: string;
  /** Lease length in ms. */
  readonly ttlMs: number;
}

type OptionSpec = Record<
  string,
  { type: "string" | "boolean"; short?: string; multiple?: boolean }
>;

/**
 * Parses `argv` with `options`; everything after `--` is the command. Unknown options and
 * bad values are `UsageError`s naming the option.
 */
export function parse(
  argv: readonly string[],
  options: OptionSpec,
): {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  command: string[];
} {
  const dash = argv.indexOf("--");
  const head = dash >= 0 ? argv.slice(0, dash) : [...argv];
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  try {
    const { values, positionals } = parseArgs({
      args: head,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
    return {
      values: values as Record<string, string | boolean | string[] | undefined>,
      positionals,
      command,
    };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Library options by the flag that sets them, so errors name what the user typed. */
const FLAGS: Readonly<Record<string, string>> = {
  ttlMs: "--ttl",
  waitMs: "--wait",
  value: "--value",
  url: "--backend",
  backend: "--backend",
  name: "NAME",
  atMostMs: "--at-most",
  maxAttempts: "--max-attempts",
  catchUpMs: "--catch-up",
  timezone: "--timezone",
  cron: "CRON",
  job: "JOB",
  slot: "SLOT",
};

/**
 * A library `ConfigError` as a `UsageError` that names the flag the user typed (`--ttl`, not
 * the library's field `ttlMs`), keeping the library's explanation.
 */
export function usageFromConfig(error: ConfigError): UsageError {
  const flag = FLAGS[error.field];
  return flag === undefined ? new UsageError(error.message) : usageNaming(flag, error);
}

/**
 * A library `ConfigError` as a `UsageError` about `flag` (what the user typed): the library's
 * explanation, its field name replaced by the flag.
 */
export function usageNaming(flag: string, error: ConfigError): UsageError {
  const prefix = `${error.field}: `;
  const text = error.message.startsWith(prefix)
    ? error.message.slice(prefix.length)
    : error.message;
  return new UsageError(`${flag}: ${text}`);
}

/** The backend URL from `--backend` or `BATON_BACKEND`, checked without I/O. */
export function backendFrom(
  value: string | boolean | string[] | undefined,
  env: NodeJS.ProcessEnv,
): string {
  const url = typeof value === "string" ? value : env.BATON_BACKEND;
  if (url === undefined || url === "") {
    throw new UsageError(
      "no backend: pass --backend URL or set BATON_BACKEND (e.g. redis://127.0.0.1:6379)",
    );
  }
  try {
    parseBackendUrl(url);
  } catch (error) {
    if (error instanceof ConfigError) throw usageFromConfig(error);
    throw error;
  }
  return url;
}

/** A whole number of milliseconds within bounds (at most a day unless `max`), for option `name`. */
export function msOption(
  value: string | boolean | string[] | undefined,
  name: string,
  fallback: number,
  min: number,
  max = 86_400_000,
): number {
  return wholeOption(value, name, fallback, min, max, "milliseconds");
}

/** A whole number within bounds, for option `name` (e.g. `--max-attempts`). */
export function countOption(
  value: string | boolean | string[] | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  return wholeOption(value, name, fallback, min, max, "number");
}

function wholeOption(
  value: string | boolean | string[] | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
  unit: "milliseconds" | "number",
): number {
  if (value === undefined) return fallback;
  const n = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const what = unit === "milliseconds" ? "a whole number of milliseconds" : "a whole number";
    throw new UsageError(`--${name} must be ${what} from ${min} to ${max}, got "${String(value)}"`);
  }
  return n;
}

/** The single NAME positional. */
export function nameFrom(positionals: readonly string[], usage: string): string {
  if (positionals.length !== 1) {
    throw new UsageError(
      positionals.length === 0
        ? `missing NAME\n${usage}`
        : `expected one NAME, got ${positionals.join(" ")}`,
    );
  }
  return positionals[0] as string;
}
