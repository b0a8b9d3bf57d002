import { ConfigError } from "../contract/errors.js";

/** Limits Baton enforces on user input, before any I/O. */
export const LIMITS = {
  /** Longest lock name, in characters. */
  nameMaxLength: 256,
  /** Longest owner id, in characters. */
  ownerIdMaxLength: 256,
  /** Longest value published with a grant, in characters. */
  valueMaxLength: 4096,
  /** Shortest TTL core accepts (a backend may demand more, e.g. etcd's 2 s). */
  ttlMinMs: 10,
  /** Longest TTL, and longest wait: one day. */
  maxMs: 86_400_000,
} as const;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we reject
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** In a `u` regular expression a surrogate pair is one code point, so this finds only lone ones. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Throws `ConfigError` unless `value` is a lock name: a non-empty bounded string of well-formed
 * UTF-16 (no unpaired surrogate) without control characters.
 */
export function checkName(value: unknown, field = "name"): string {
  if (typeof value !== "string")
    throw new ConfigError(field, `must be a string, got ${kind(value)}`);
  if (value.length === 0) throw new ConfigError(field, "must not be empty");
  if (value.length > LIMITS.nameMaxLength) {
    throw new ConfigError(
      field,
      `must be at most ${LIMITS.nameMaxLength} characters, got ${value.length}`,
    );
  }
  if (CONTROL.test(value)) throw new ConfigError(field, "must not contain control characters");
  checkWellFormed(value, field);
  return value;
}

/**
 * Throws `ConfigError` when `value` has an unpaired UTF-16 surrogate. Stores keep names and
 * values as UTF-8, which cannot spell one: `"x\ud800"` and `"x\udbff"` would both be stored as
 * `"x\ufffd"` and meet as one lock on one backend while staying apart on another.
 */
function checkWellFormed(value: string, field: string): void {
  const lone = LONE_SURROGATE.exec(value);
  if (lone !== null) {
    throw new ConfigError(
      field,
      `must be well-formed Unicode: it has an unpaired UTF-16 surrogate at index ${lone.index}`,
    );
  }
}

/**
 * Throws `ConfigError` naming `field` unless `value` is a function; `message` says what is
 * expected when a plain "must be a function" would not.
 */
export function checkFunction(
  value: unknown,
  field: string,
  message = "must be a function",
): asserts value is (...args: never[]) => unknown {
  if (typeof value !== "function") throw new ConfigError(field, message);
}

/** Throws `ConfigError` unless `value` is an integer within `[min, max]`. */
export function checkInt(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(
      field,
      `must be an integer between ${min} and ${max}${field.endsWith("Ms") ? " (milliseconds)" : ""}, got ${show(value)}`,
    );
  }
  return value;
}

/**
 * Throws `ConfigError` unless `value` is a string of at most `max` characters of well-formed
 * UTF-16 without control characters.
 */
export function checkString(value: unknown, field: string, max: number): string {
  if (typeof value !== "string")
    throw new ConfigError(field, `must be a string, got ${kind(value)}`);
  if (value.length > max)
    throw new ConfigError(field, `must be at most ${max} characters, got ${value.length}`);
  if (CONTROL.test(value)) throw new ConfigError(field, "must not contain control characters");
  checkWellFormed(value, field);
  return value;
}

/** Throws `ConfigError` unless `value` is an `AbortSignal`. */
export function checkSignal(value: unknown, field = "signal"): AbortSignal {
  if (!(value instanceof AbortSignal)) {
    throw new ConfigError(field, `must be an AbortSignal, got ${kind(value)}`);
  }
  return value;
}

/** Throws `ConfigError` unless `value` is a plain object whose keys are all in `allowed`. */
export function checkOptions(
  value: unknown,
  field: string,
  allowed: readonly string[],
): Record<string, unknown> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError(field, `must be an object, got ${kind(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new ConfigError(`${field}.${key}`, `unknown option; allowed: ${allowed.join(", ")}`);
    }
  }
  return value as Record<string, unknown>;
}

/** Throws `ConfigError` unless `value` is one of `allowed`. */
export function checkOneOf<T extends string>(
  value: unknown,
  field: string,
  allowed: readonly T[],
): T {
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(
      field,
      `must be one of ${allowed.map((a) => `"${a}"`).join(", ")}, got ${show(value)}`,
    );
  }
  return value as T;
}

function kind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") {
    return String(value);
  }
  return kind(value);
}
