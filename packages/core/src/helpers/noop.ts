/** Does nothing: the one empty callback core passes where a function is required. */
export function noop(): void {}
