import { type AcquireOptions, ConfigError } from "@baton/core";
import { lockStorage } from "./lock-context.js";
import { replaceMethod } from "./method-wrapper.js";
import { runtimeFor } from "./runtime.js";

/** Options of {@link WithLock}: those of `coordinator.withLock` (`waitMs`, `ttlMs`, `value`). */
export type WithLockOptions = Omit<AcquireOptions, "signal">;

/**
 * Runs the method under lock `name` (or the name `name(...args)` returns for the call's
 * arguments) of the {@link BatonModule}'s coordinator, as `coordinator.withLock` does: the
 * call waits for the lock (up to `waitMs`, default 60 s; then it rejects with a
 * `LockTimeoutError`), the lock is released when the method settles, and a call whose lock
 * was lost while it ran rejects with the `LockLostError`. The method always returns a
 * promise. Inside it, {@link currentLock} gives the lock's fencing `token` and its `signal`.
 *
 * @example
 * ```ts
 * @Controller("accounts")
 * class Accounts {
 *   @Post(":id/deposit")
 *   @WithLock((id: string) => `account/${id}`, { waitMs: 5_000 })
 *   async deposit(@Param("id") id: string) {
 *     const { token } = currentLock()!;
 *     return { id, token: `${token}` };
 *   }
 * }
 * ```
 */
export function WithLock(
  // biome-ignore lint/suspicious/noExplicitAny: the name function takes the method's arguments.
  name: string | ((...args: any[]) => string),
  options: WithLockOptions = {},
): MethodDecorator {
  if (typeof name !== "function" && (typeof name !== "string" || name === "")) {
    throw new ConfigError("@WithLock", "takes a lock name or a function of the arguments");
  }
  return (_target, key, descriptor) => {
    replaceMethod(
      "@WithLock",
      key,
      descriptor,
      (original) =>
        async function (this: unknown, ...args: unknown[]) {
          const runtime = runtimeFor(this, "@WithLock");
          const lockName = typeof name === "function" ? name(...args) : name;
          return await runtime.coordinator.withLock(
            lockName,
            (context) => lockStorage.run(context, () => original.apply(this, args)),
            options,
          );
        },
    );
  };
}
