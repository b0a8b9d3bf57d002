import "reflect-metadata";
import { ConfigError, type RunOnceOptions, type RunOnceResult } from "@baton/core";
import { type CronTiming, cronSlot } from "./cron-slot.js";
import { runStorage } from "./lock-context.js";
import { replaceMethod } from "./method-wrapper.js";
import { describeError, nestLogger } from "./nest-logger.js";
import { runtimeFor } from "./runtime.js";

/** Where `@Cron()` of @nestjs/schedule records its expression and time zone. */
const CRON_METADATA = "SCHEDULE_CRON_OPTIONS";
/** `runOnce`'s default `atMostMs` (one hour), as `coordinator.schedule()` uses it. */
const DEFAULT_AT_MOST_MS = 3_600_000;

/** Options of {@link RunOnce}. */
export interface RunOnceDecoratorOptions
  extends Pick<RunOnceOptions, "atMostMs" | "maxAttempts" | "ttlMs" | "waitMs"> {
  /**
   * Called with what each tick's call did here (ran, failed, or skipped because another
   * replica ran it), as `coordinator.schedule()`'s `onResult`.
   */
  readonly onResult?: (result: RunOnceResult<unknown>, slot: string) => void;
}

/**
 * Makes a `@Cron()` method of @nestjs/schedule run once per tick across every replica that
 * has it, as `coordinator.schedule()` does: each tick is a slot of `coordinator.runOnce(job,
 * slot)`, named after the tick's instant in UTC (`2026-12-01T02:00:00Z`). The replica that
 * gets the slot runs the method; the others wait while it runs (up to `atMostMs` plus two
 * TTLs, as `schedule()` waits) and take the slot over if it crashes or fails, so a replica
 * killed during a run does not lose the tick. A slot that is done never runs again.
 *
 * Inside the method, {@link currentRun} gives the slot, the fencing `token` to write with, and
 * the `signal` aborted when the attempt must stop. Failures, and ticks the store could not be
 * reached for, are written to Nest's logger; `onResult` hears of every tick.
 *
 * @example
 * ```ts
 * @Injectable()
 * class Invoices {
 *   @Cron("0 0 2 * * *")
 *   @RunOnce("invoices")
 *   async bill() {
 *     const { token, signal } = currentRun()!;
 *     await billEveryClient({ fencingToken: token, signal });
 *   }
 * }
 * ```
 */
export function RunOnce(job: string, options: RunOnceDecoratorOptions = {}): MethodDecorator {
  if (typeof job !== "string" || job === "") {
    throw new ConfigError("@RunOnce", "takes the job's name, a non-empty string");
  }
  return (_target, key, descriptor) => {
    let wrapper: (...args: unknown[]) => Promise<unknown>;
    replaceMethod("@RunOnce", key, descriptor, (original) => {
      wrapper = async function (this: unknown, ...args: unknown[]) {
        const now = Date.now();
        const timing = (Reflect.getMetadata(CRON_METADATA, wrapper) ??
          Reflect.getMetadata(CRON_METADATA, original)) as CronTiming | undefined;
        if (timing === undefined) {
          throw new ConfigError(
            "@RunOnce",
            `${String(key)} has no @Cron() of @nestjs/schedule: a tick names the slot`,
          );
        }
        const runtime = runtimeFor(this, "@RunOnce");
        const slot = cronSlot(timing, now);
        const atMostMs = options.atMostMs ?? DEFAULT_AT_MOST_MS;
        const ttlMs = options.ttlMs ?? runtime.coordinator.ttlMs;
        let result: RunOnceResult<unknown>;
        try {
          result = await runtime.coordinator.runOnce(
            job,
            slot,
            (context) => runStorage.run(context, () => original.apply(this, args)),
            {
              atMostMs,
              ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
              ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
              waitMs: options.waitMs ?? atMostMs + 2 * ttlMs,
              signal: runtime.closing,
            },
          );
        } catch (error) {
          if (!runtime.closing.aborted) {
            nestLogger.error(`@RunOnce("${job}") slot ${slot} did not run`, describeError(error));
          }
          return undefined;
        }
        if (result.outcome === "failed" && !runtime.closing.aborted) {
          nestLogger.error(
            `@RunOnce("${job}") slot ${slot} failed (attempt ${result.attempt}, ${result.attemptsLeft} left)`,
            describeError(result.error),
          );
        }
        try {
          options.onResult?.(result, slot);
        } catch (error) {
          nestLogger.error(`the onResult of @RunOnce("${job}") failed`, describeError(error));
        }
        return result.outcome === "ran" ? result.value : undefined;
      };
      return wrapper as (this: unknown, ...args: unknown[]) => unknown;
    });
  };
}
