import "reflect-metadata";
import { ConfigError, type TermContext } from "@baton/core";

/** Where `@Leader` records what it campaigns for. */
export const LEADER_METADATA = "baton:leader";

/** Options of {@link Leader}. */
export interface LeaderOptions {
  /** Published while this instance leads (what `election.leader()` shows), e.g. its address. */
  readonly value?: string;
}

/** What `@Leader` records on its method. */
export interface LeaderMetadata {
  readonly name: string;
  readonly options: LeaderOptions;
}

/** A provider decorated with `@Leader` as a whole: its `lead` method runs while it leads. */
export interface LeaderProvider {
  /** Called with each term this instance leads; see {@link Leader}. */
  lead(term: TermContext): unknown;
}

/**
 * Runs the method only while this instance leads election `name` (on a provider class: its
 * `lead(term)` method, see {@link LeaderProvider}): once the application has
 * started, every instance campaigns; the one elected calls the method with its term (`signal`,
 * `term`, `token`), and the `signal` aborts when the term ends (the lease was lost, the
 * application is closing). The method may return at once after starting work tied to the
 * signal, or run until it aborts. When the instance is elected again, the method runs again.
 * If it throws, the instance steps down, the error goes to Nest's logger, and it campaigns
 * again. On `app.close()` (SIGTERM with `enableShutdownHooks()`), the leader steps down before
 * the other modules close, so another instance takes over at once instead of after a TTL.
 *
 * @example
 * ```ts
 * @Injectable()
 * class Reindexer {
 *   @Leader("reindexer")
 *   async reindex({ signal, token }: TermContext) {
 *     while (!signal.aborted) await reindexNextBatch({ fencingToken: token, signal });
 *   }
 * }
 * ```
 */
export function Leader(
  name: string,
  options: LeaderOptions = {},
): MethodDecorator &
  (<T extends abstract new (...args: never[]) => LeaderProvider>(target: T) => void) {
  if (typeof name !== "string" || name === "") {
    throw new ConfigError("@Leader", "takes the election's name, a non-empty string");
  }
  const metadata: LeaderMetadata = { name, options };
  return ((target: object, key?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (key === undefined) {
      const lead = (target as { prototype?: { lead?: unknown } }).prototype?.lead;
      if (typeof lead !== "function") {
        throw new ConfigError("@Leader", "on a class, the class needs a lead(term) method");
      }
      Reflect.defineMetadata(LEADER_METADATA, metadata, target);
      return;
    }
    if (typeof descriptor?.value !== "function") {
      throw new ConfigError("@Leader", `decorates a method; ${String(key)} is not one`);
    }
    Reflect.defineMetadata(LEADER_METADATA, metadata, descriptor.value);
  }) as MethodDecorator &
    (<T extends abstract new (...args: never[]) => LeaderProvider>(target: T) => void);
}
