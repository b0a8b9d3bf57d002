import type { Guarantees } from "@baton/core";
import { afterAll, afterEach, beforeAll, describe } from "vitest";
import { badInputGroup } from "./groups/bad-input.js";
import { basicGroup } from "./groups/basic.js";
import { cancellationGroup } from "./groups/cancellation.js";
import { electionGroup } from "./groups/election.js";
import { errorsGroup } from "./groups/errors.js";
import { exclusionGroup } from "./groups/exclusion.js";
import { expiryGroup } from "./groups/expiry.js";
import { fifoGroup } from "./groups/fifo.js";
import { handoffGroup } from "./groups/handoff.js";
import { lockTtlGroup } from "./groups/lock-ttl.js";
import { metricsGroup } from "./groups/metrics.js";
import { operationsGroup } from "./groups/operations.js";
import { partitionsGroup } from "./groups/partitions.js";
import type { PermitGroupOptions } from "./groups/permit-support.js";
import { renewalGroup } from "./groups/renewal.js";
import { runOnceGroup } from "./groups/run-once.js";
import { rwlockGroup } from "./groups/rwlock.js";
import { scenariosGroup } from "./groups/scenarios.js";
import { noSemaphoresGroup, semaphoreGroup } from "./groups/semaphore.js";
import { signalsGroup } from "./groups/signals.js";
import { tokensGroup } from "./groups/tokens.js";
import { watchGroup } from "./groups/watch.js";
import { withLockGroup } from "./groups/with-lock.js";
import { skipUnless } from "./skip-unless.js";
import { SuiteContext } from "./suite-context.js";
import type { ConformanceTarget } from "./target.js";

/** Capabilities the suite reads from the backend, known only after it is created. */
export interface DeclaredCapabilities {
  readonly fencing: "monotonic" | "single-node" | "none";
  readonly fifo: boolean;
  readonly watch: boolean;
  /** Locks exclude other processes (election runs candidates in worker processes). */
  readonly crossProcess?: boolean;
  /** Semaphores and read-write locks (the backend's `semaphores` guarantee). */
  readonly semaphores: boolean;
  /**
   * `holder()` tells the time left on the lease of a lock another session holds
   * (`Holder.remainingMs`). True: the suite checks that it is given and within the lease;
   * false: that it is absent; not given: only that a time left, when given, is within the lease.
   */
  readonly timeLeft?: boolean;
  /**
   * How a waiter of another process learns of a release (the backend's `waiters` guarantee;
   * absent: `"poll"`). With `"woken"` on a backend without FIFO, the suite checks that two
   * coordinators taking turns at one name hand it over in milliseconds; with `"poll-resets"`,
   * that a waiter elsewhere gets a name another coordinator keeps taking again at once within
   * the first hand-offs of that run (3.5 s, against 8 s with `"poll"`).
   */
  readonly waiters?: Guarantees["waiters"];
}

/**
 * Registers the whole conformance suite for `target` with vitest. Call it at the top level
 * of a test file. Groups a backend does not declare (FIFO, tokens, watch) are skipped because
 * of its declared guarantees, and every skip is printed with its reason.
 *
 * @example
 * runConformance({ name: "memory", ttlMs: 300, createBackend: () => new MemoryBackend() },
 *   { fencing: "monotonic", fifo: true, watch: true, semaphores: true });
 */
export function runConformance(target: ConformanceTarget, declared: DeclaredCapabilities): void {
  const ctx = new SuiteContext(target);
  describe(`conformance: ${target.name}`, () => {
    beforeAll(async () => {
      await ctx.start();
      const g = ctx.backend.guarantees;
      const hasWatch = (await probeWatch(ctx)) === true;
      const waiters = g.waiters ?? "poll";
      if (
        g.fencing !== declared.fencing ||
        g.fifo !== declared.fifo ||
        hasWatch !== declared.watch ||
        g.semaphores !== declared.semaphores ||
        waiters !== (declared.waiters ?? "poll")
      ) {
        throw new Error(
          `conformance: ${target.name} declares fencing=${g.fencing} fifo=${g.fifo} watch=${hasWatch} semaphores=${g.semaphores} waiters=${waiters}, but the test file registered fencing=${declared.fencing} fifo=${declared.fifo} watch=${declared.watch} semaphores=${declared.semaphores} waiters=${declared.waiters ?? "poll"}`,
        );
      }
    });
    afterEach(async () => {
      await ctx.cleanup();
    });
    afterAll(async () => {
      await ctx.stop();
    });

    basicGroup(ctx, declared.timeLeft);
    withLockGroup(ctx);
    cancellationGroup(ctx);
    handoffGroup(
      ctx,
      !declared.fifo && declared.waiters === "woken",
      declared.crossProcess === true,
      !declared.fifo && declared.waiters === "poll-resets",
    );
    expiryGroup(ctx);
    renewalGroup(ctx);
    lockTtlGroup(ctx);
    signalsGroup(ctx);
    exclusionGroup(ctx);
    badInputGroup(ctx);
    errorsGroup(
      ctx,
      target.url === undefined ? undefined : () => urlOf(target),
      declared.crossProcess === true,
    );
    skipUnless(declared.fencing !== "none", `${target.name} declares fencing "none"`, () =>
      tokensGroup(ctx),
    );
    skipUnless(declared.fifo, `${target.name} does not declare FIFO waiting`, () => fifoGroup(ctx));
    skipUnless(declared.watch, `${target.name} has no watch()`, () => watchGroup(ctx));
    const url = target.url;
    const electionSkip =
      declared.crossProcess !== true
        ? `${target.name} is not cross-process (election runs candidates in worker processes)`
        : declared.fencing === "none"
          ? `${target.name} declares fencing "none": election terms are fencing tokens`
          : url === undefined
            ? `${target.name}: no url given for worker processes`
            : undefined;
    const workerUrl = typeof url === "function" ? url : () => url ?? "";
    skipUnless(electionSkip === undefined, electionSkip ?? "", () => {
      electionGroup(ctx, workerUrl);
      partitionsGroup(ctx, workerUrl);
      metricsGroup(ctx, workerUrl);
    });
    const scenariosSkip =
      declared.crossProcess !== true
        ? `${target.name} is not cross-process (fault scenarios freeze holders in worker processes)`
        : url === undefined
          ? `${target.name}: no url given for worker processes`
          : undefined;
    skipUnless(scenariosSkip === undefined, scenariosSkip ?? "", () =>
      scenariosGroup(ctx, workerUrl, declared),
    );
    const replicasSkip =
      declared.crossProcess !== true
        ? `${target.name} is not cross-process (runOnce replicas run in worker processes)`
        : url === undefined
          ? `${target.name}: no url given for worker processes`
          : undefined;
    runOnceGroup(ctx, workerUrl, replicasSkip);
    const permitWorkersSkip =
      declared.crossProcess !== true
        ? `${target.name} is not cross-process (permit holders are frozen and killed in worker processes)`
        : url === undefined
          ? `${target.name}: no url given for worker processes`
          : undefined;
    const permitOptions: PermitGroupOptions = {
      fifo: declared.fifo,
      fencing: declared.fencing !== "none",
      workers: permitWorkersSkip === undefined ? { url: workerUrl } : { skip: permitWorkersSkip },
    };
    skipUnless(
      declared.semaphores,
      `${target.name} declares no semaphores or read-write locks`,
      () => {
        semaphoreGroup(ctx, permitOptions);
        rwlockGroup(ctx, permitOptions);
      },
    );
    if (!declared.semaphores) noSemaphoresGroup(ctx);
    operationsGroup(
      ctx,
      declared.crossProcess === true && url !== undefined ? workerUrl : undefined,
    );
  });
}

function urlOf(target: ConformanceTarget): string {
  const url = target.url;
  return typeof url === "function" ? url() : (url ?? "");
}

async function probeWatch(ctx: SuiteContext): Promise<boolean> {
  const session = await ctx.backend.openSession({ ttlMs: ctx.target.ttlMs * 10, ownerId: "probe" });
  try {
    return typeof session.watch === "function";
  } finally {
    await session.close();
  }
}
