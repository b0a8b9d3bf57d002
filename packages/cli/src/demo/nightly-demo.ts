// The demo's nightly scene: three replicas run the same 02:00 billing job on their own timers,
// which fire seconds apart because their clocks differ. A lock alone lets a late replica bill
// everyone again once the first run has released it; runOnce records the night done.
import { redactUrl } from "@baton/core";
import {
  type NightlyGuard,
  type NightlyResult,
  type NightlySettings,
  runNightlyScene,
} from "./nightly-scene.js";

export type { NightlyGuard, NightlyResult, NightlySettings };

/** The two guards, one row each: the lock alone first, as the comparison. */
export const NIGHTLY_GUARDS: readonly NightlyGuard[] = ["lock only", "runOnce"];

/**
 * Defaults: 600 clients; the replicas' timers fire 0, 1 and 2 s after replica 1's; a run takes
 * 1.5 s, so replica 2 fires while replica 1 runs and replica 3 after it has finished.
 */
export const DEFAULT_NIGHTLY_SETTINGS: NightlySettings = {
  clients: 600,
  clockOffsetsMs: [0, 1_000, 2_000],
  runMs: 1_500,
  night: "2026-12-01",
  ttlMs: 800,
};

/** Plays the nightly scene once per guard, side by side (each its own store and job). */
export async function runNightlyDemo(
  settings: Partial<NightlySettings> = {},
): Promise<NightlyResult[]> {
  const s: NightlySettings = { ...DEFAULT_NIGHTLY_SETTINGS, ...settings };
  return await Promise.all(NIGHTLY_GUARDS.map((guard) => runNightlyScene(guard, s)));
}

/** The nightly table and a short explanation, as `npm run demo` prints them. */
export function formatNightlyReport(
  rows: readonly NightlyResult[],
  settings: NightlySettings = DEFAULT_NIGHTLY_SETTINGS,
): string {
  const replicas = settings.clockOffsetsMs.map((_, i) => `replica ${i + 1}`);
  const header = ["guard", ...replicas, "invoices sent", "billed once", "billed twice or more"];
  const cells = rows.map((row) => [
    row.refused === undefined ? row.guard : `${row.guard} (refused)`,
    ...row.replicas,
    String(row.invoices),
    String(row.billedOnce),
    String(row.billedTwice),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]?.length ?? 0)));
  const numeric = (i: number) => i >= header.length - 3;
  const line = (c: readonly string[]) =>
    c.map((cell, i) => (numeric(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)));
  const fires = settings.clockOffsetsMs.map((offset) => clockTime(offset)).join(", ");
  const slot = rows.find((r) => r.slot !== undefined)?.slot;
  const refused = rows
    .filter((r) => r.refused !== undefined)
    .map((r) => `Refused ${r.guard}: ${r.refused}`);
  return [
    `Nightly billing at 02:00 UTC on ${redactUrl(settings.backend ?? "memory://")}: ${replicas.length} replicas, ${settings.clients} clients.`,
    `Their clocks differ, so their timers fire at ${fires}; a run takes ${(settings.runMs / 1000).toFixed(1)} s.`,
    "",
    line(header).join("  ").trimEnd(),
    line(widths.map((w) => "-".repeat(w))).join("  "),
    ...cells.map((c) => line(c).join("  ").trimEnd()),
    "",
    ...refused,
    "Lock only: replica 2 found the lock held and skipped, but replica 3's timer fired after replica 1",
    "had finished and released it, so it took the free lock and billed every client again.",
    `runOnce: the replicas agreed on the slot${slot === undefined ? "" : ` ${slot}`} from the cron tick, not from their clocks;`,
    "replica 1 ran it and recorded it done beside the lock, replica 2 waited for that run, and",
    "replica 3 found it done: each client billed once.",
  ].join("\n");
}

/** 02:00:00 plus `offsetMs`, as a clock shows it (to the tenth of a second, when not whole). */
function clockTime(offsetMs: number): string {
  const shown = new Date(Date.UTC(2000, 0, 1, 2) + offsetMs).toISOString().slice(11, 21);
  return shown.endsWith(".0") ? shown.slice(0, -2) : shown;
}
