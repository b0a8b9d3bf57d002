export { DEFAULT_SETTINGS, formatReport, runInvoiceDemo, VARIANTS } from "./demo/invoice-demo.js";
export { EXIT } from "./exit-codes.js";
export { main } from "./main.js";
