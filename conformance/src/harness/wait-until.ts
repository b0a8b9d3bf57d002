/**
 * Polls `check` every `intervalMs` until it resolves true.
 *
 * @param what - names the condition in the timeout error
 * @param timeoutMs - give up after this long
 * @param check - resolves true when the condition holds; rejections count as false
 * @throws Error when the timeout passes first
 */
export async function waitUntil(
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
  intervalMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) {
      return;
    }
    if (Date.now() >= deadline) {
      throw new Error(`${what}: not reached within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
