import "reflect-metadata";
import { ConfigError } from "@baton/core";

/** Marks a method wrapped by a Baton decorator, so the module finds the providers that have one. */
export const BATON_WRAPPED = "baton:wrapped";

// biome-ignore lint/suspicious/noExplicitAny: a decorated method may have any signature.
export type AnyMethod = (this: unknown, ...args: any[]) => unknown;

/**
 * Replaces the decorated method with `make(original)`, keeping what other decorators recorded
 * on it (routes, `@Cron()`, guards), whichever order they were applied in, and its name.
 */
export function replaceMethod(
  decorator: string,
  key: string | symbol,
  descriptor: PropertyDescriptor,
  make: (original: AnyMethod) => AnyMethod,
): void {
  const original = descriptor.value as unknown;
  if (typeof original !== "function") {
    throw new ConfigError(decorator, `decorates a method; ${String(key)} is not one`);
  }
  const wrapper = make(original as AnyMethod);
  for (const metadataKey of Reflect.getOwnMetadataKeys(original)) {
    Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, original), wrapper);
  }
  Reflect.defineMetadata(BATON_WRAPPED, true, wrapper);
  Object.defineProperty(wrapper, "name", { value: original.name });
  descriptor.value = wrapper;
}
