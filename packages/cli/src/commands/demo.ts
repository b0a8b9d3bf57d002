import { backendFrom, msOption, parse } from "../args.js";
import { demoTtl } from "../demo/demo-ttl.js";
import { DEFAULT_SETTINGS, formatReport, runInvoiceDemo } from "../demo/invoice-demo.js";
import {
  DEFAULT_NIGHTLY_SETTINGS,
  formatNightlyReport,
  runNightlyDemo,
} from "../demo/nightly-demo.js";

export const DEMO_USAGE = `usage: baton demo [--backend URL] [--ttl MS]

Plays the invoice story: three runners bill 20 clients; runner 1 freezes past its
lease after checking its lock; runner 2 takes over. Three ways of guarding the writes: lock
only, lock + signal, lock + fence. Without --backend (or BATON_BACKEND) it runs on the
embedded memory backend; with a URL, on that store (runner 1's pause is simulated in process).
Correctness mode refuses backends without monotonic fencing tokens; the table says so.

Then the nightly scene: three replicas whose clocks are seconds apart run the same 02:00
billing of 600 clients on their own timers, guarded by a lock alone and by runOnce (the
scene's clock starts just before 02:00). runOnce needs a backend that keeps records.

  --ttl MS   lease length (default ${DEFAULT_SETTINGS.ttlMs}, or on a store that grants leases in
             larger steps the next whole second it grants: 2000 on etcd)`;

/** `baton demo`. Resolves with the exit code. */
export async function demoCommand(
  argv: readonly string[],
  out: (s: string) => void,
): Promise<number> {
  const { values } = parse(argv, { backend: { type: "string" }, ttl: { type: "string" } });
  if (values.help) {
    out(DEMO_USAGE);
    return 0;
  }
  const given = values.backend ?? process.env.BATON_BACKEND;
  const backend = given === undefined ? undefined : backendFrom(values.backend, process.env);
  const ttlMs =
    values.ttl === undefined && backend !== undefined
      ? await demoTtl(backend, DEFAULT_SETTINGS.ttlMs)
      : msOption(values.ttl, "ttl", DEFAULT_SETTINGS.ttlMs, 100);
  const settings = { ...DEFAULT_SETTINGS, ttlMs, ...(backend !== undefined ? { backend } : {}) };
  const started = performance.now();
  const nightly = {
    ...DEFAULT_NIGHTLY_SETTINGS,
    ttlMs,
    ...(backend !== undefined ? { backend } : {}),
  };
  const [rows, nights] = await Promise.all([runInvoiceDemo(settings), runNightlyDemo(nightly)]);
  out(formatReport(rows, settings));
  out("");
  out(formatNightlyReport(nights, nightly));
  out(`\n(${((performance.now() - started) / 1000).toFixed(1)} s)`);
  return 0;
}
