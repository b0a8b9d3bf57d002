import { Inject } from "@nestjs/common";

/**
 * The injection token of the {@link BatonModule}'s `Coordinator`: `@Inject(BATON_COORDINATOR)`
 * (or {@link InjectCoordinator}) in a constructor, `app.get(BATON_COORDINATOR)` outside one.
 */
export const BATON_COORDINATOR = "BATON_COORDINATOR";

/** The injection token of the options the {@link BatonModule} was configured with. */
export const BATON_MODULE_OPTIONS = "BATON_MODULE_OPTIONS";

/**
 * Injects the {@link BatonModule}'s `Coordinator`: the same as `@Inject(BATON_COORDINATOR)`.
 *
 * @example
 * ```ts
 * @Injectable()
 * class Billing {
 *   constructor(@InjectCoordinator() private readonly coordinator: Coordinator) {}
 * }
 * ```
 */
export function InjectCoordinator(): PropertyDecorator & ParameterDecorator {
  return Inject(BATON_COORDINATOR);
}
