/** Version of the `@baton/nestjs` package. */
export const BATON_NESTJS_VERSION = "0.1.0";
