import { setTimeout as sleep } from "node:timers/promises";
import type { RunContext } from "@baton/core";
import { currentRun, RunOnce } from "@baton/nestjs";
import { Injectable } from "@nestjs/common";
import { Cron } from "@nestjs/schedule";
import { record } from "./events.js";

/** Every 10 seconds by default; the example's test runs it every second. */
const REPORT_CRON = process.env.REPORT_CRON ?? "*/10 * * * * *";
/** How long writing a report takes. */
const REPORT_MS = Number(process.env.REPORT_MS ?? 300);

/**
 * A job every replica schedules, run once per tick across all of them: the replica that gets
 * the tick writes the report; if it dies meanwhile, another takes the tick over.
 */
@Injectable()
export class ReportJob {
  @Cron(REPORT_CRON)
  @RunOnce("report", { atMostMs: 30_000 })
  async writeReport(): Promise<void> {
    const { slot, token, signal } = currentRun() as RunContext;
    record("report-started", { slot, token: `${token}` });
    await sleep(REPORT_MS, undefined, { signal });
    // The write a slot must make once: checked against the signal, sent with the token.
    signal.throwIfAborted();
    record("report-written", { slot, token: `${token}` });
  }
}
