/**
 * `@baton/cli`: the `baton` command (`lock`, `elect`, `status`, `demo`, `compare`) and the
 * functions behind it, for running it from your own code.
 *
 * @packageDocumentation
 * @module @baton/cli
 */
export { DEFAULT_SETTINGS, formatReport, runInvoiceDemo, VARIANTS } from "./demo/invoice-demo.js";
export { EXIT } from "./exit-codes.js";
export { main } from "./main.js";
