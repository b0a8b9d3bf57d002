/**
 * `@baton/cli`: the `baton` command (`lock`, `elect`, `run-once`, `cron`, `status`, `ls`,
 * `top`, `release`, `dashboard`, `demo`, `compare`) and the functions behind it, for running
 * it from your own code.
 *
 * @packageDocumentation
 * @module @baton/cli
 */
export { DEFAULT_SETTINGS, formatReport, runInvoiceDemo, VARIANTS } from "./demo/invoice-demo.js";
export {
  DEFAULT_NIGHTLY_SETTINGS,
  formatNightlyReport,
  NIGHTLY_GUARDS,
  type NightlyGuard,
  type NightlyResult,
  type NightlySettings,
  runNightlyDemo,
} from "./demo/nightly-demo.js";
export { EXIT } from "./exit-codes.js";
export { main } from "./main.js";
