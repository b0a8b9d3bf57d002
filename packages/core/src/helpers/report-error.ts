/**
 * Hands a background error to the user's `onError`, or to the coordinator's report (its
 * `backgroundError` event) when there is none or when `onError` itself throws.
 */
export function reportError(
  onError: ((error: unknown) => void) | undefined,
  report: (error: unknown, during: string) => void,
  error: unknown,
  during: string,
): void {
  if (onError) {
    try {
      onError(error);
      return;
    } catch (inner) {
      report(inner, "onError");
    }
  }
  report(error, during);
}
