/** Version of the `@baton/node-cron` package. */
export const BATON_NODE_CRON_VERSION = "0.1.0";
