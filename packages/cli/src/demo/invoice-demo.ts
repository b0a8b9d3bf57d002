// `baton demo` (and `npm run demo`): the invoice story, on the memory backend or any URL.
//
// Three runners (servers) share one lock store and one invoices table, and each one's
// scheduler tries tonight's invoice run until it is marked done. Runner 1 takes the lock,
// bills a few clients, checks its lock, and then freezes (a GC pause, a SIGSTOP, a suspended
// VM) for longer than its lease. Runner 2 takes over with a higher token; runner 1 wakes up.
// The same story runs three times, each guarding the writes a different way.
import { redactUrl } from "@baton/core";
import { runVariant, type ScenarioSettings, type Variant, type VariantResult } from "./scenario.js";

export type { ScenarioSettings, Variant, VariantResult };

/** The three ways of guarding the job, one row each. */
export const VARIANTS: readonly Variant[] = [
  // The naive job: holds the lock, ignores its signal, writes without a fence.
  { name: "lock only", checkSignal: false, fenced: false },
  // Checks `lock.signal` before each write: a pause between check and write defeats it.
  { name: "lock + signal", checkSignal: true, fenced: false },
  // Correctness mode: the fence is raised with each new token before work starts, and every
  // bill is written through `fence.write(resource, token, ...)`.
  { name: "lock + fence", checkSignal: true, fenced: true },
];

/** Defaults: a short TTL so the whole demo takes a few seconds. */
export const DEFAULT_SETTINGS: ScenarioSettings = {
  ttlMs: 800,
  clients: 20,
  billMs: [100, 150],
  freezeBeforeBill: 4,
  resumeAfterTakeoverMs: 250,
  month: "2026-10",
};

/** Options of {@link runInvoiceDemo}: any of the settings, and which variants to run. */
export interface InvoiceDemoOptions extends Partial<ScenarioSettings> {
  readonly variants?: readonly Variant[];
}

/**
 * Runs the story once per variant and returns one row each. Every variant is its own world
 * (store, fence, table, runners), so they run side by side and the demo takes one story's time.
 */
export async function runInvoiceDemo(options: InvoiceDemoOptions = {}): Promise<VariantResult[]> {
  const { variants = VARIANTS, ...overrides } = options;
  const settings: ScenarioSettings = { ...DEFAULT_SETTINGS, ...overrides };
  return await Promise.all(variants.map((variant) => runVariant(variant, settings)));
}

/** The table, the tokens and a short explanation, as `npm run demo` prints them. */
export function formatReport(
  rows: readonly VariantResult[],
  settings: ScenarioSettings = DEFAULT_SETTINGS,
): string {
  const header = [
    "variant",
    "takeover",
    "stale bills accepted",
    "stale writes rejected",
    "duplicate invoices",
  ];
  const cells = rows.map((row) => [
    row.refused === undefined ? row.variant : `${row.variant} (refused)`,
    row.takeoverMs === null ? "none" : `${row.takeoverMs} ms`,
    String(row.staleAccepted),
    String(row.staleRejected),
    String(row.duplicates),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]?.length ?? 0)));
  const line = (c: readonly string[]) =>
    c.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)));
  const tokens = rows
    .filter((r) => r.refused === undefined)
    .map((r) => `${r.variant} ${r.runner1Token} -> ${r.runner2Token}`);
  const refused = rows
    .filter((r) => r.refused !== undefined)
    .map((r) => `${r.variant}: ${r.refused}`);
  return [
    `Invoice run ${settings.month} on ${redactUrl(settings.backend ?? "memory://")}: 3 runners, ${settings.clients} clients, TTL ${settings.ttlMs} ms;` +
      ` runner 1 freezes after its lock check, before bill ${settings.freezeBeforeBill}.`,
    "",
    line(header).join("  "),
    line(widths.map((w) => "-".repeat(w))).join("  "),
    ...cells.map((c) => line(c).join("  ")),
    "",
    `Tokens (runner 1 -> the runner that took over): ${tokens.join(", ")}.`,
    ...refused.map((r) => `Refused ${r}`),
    "Runner 1 checked its lock, then froze past its lease; runner 2 took over with a higher token.",
    "Lock only: runner 1 woke and kept billing. Lock + signal: it stopped at its next check, but the",
    "bill it was about to write when it froze still went out. Lock + fence: runner 2 raised the fence",
    "first, so that write was rejected. A (client, month) key hides duplicate rows; the fence stops the writer.",
  ].join("\n");
}
