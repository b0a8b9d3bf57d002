import type { LockBackend } from "../contract/backend.js";
import { type BackendUrl, parseUrlParts } from "../contract/backend-url.js";
import { ConfigError } from "../contract/errors.js";
import type { Guarantees } from "../contract/guarantees.js";
import { checkFunction } from "../helpers/validate.js";
import { MEMORY_GUARANTEES, MemoryBackend } from "../memory/memory-backend.js";
import { memoryOptionsFromUrl } from "../memory/memory-options.js";

/** Builds a backend from a parsed URL. Adapters register one per scheme. */
export type BackendFactory = (url: BackendUrl) => LockBackend | Promise<LockBackend>;

/**
 * Checks what an adapter reads from a parsed URL (query parameters, path, user info) without
 * any I/O, throwing `ConfigError` for anything it does not understand. Registered with
 * {@link registerBackend}, it runs in {@link parseBackendUrl}, so `createCoordinator({ url })`
 * refuses a misspelt option at construction. It must not call `parseBackendUrl` itself.
 */
export type BackendUrlCheck = (url: BackendUrl) => void;

/**
 * The package that serves each of Baton's own schemes, loaded on first use when the app did
 * not import it. What a backend guarantees is declared by its adapter alone, when it registers.
 */
const KNOWN: Record<string, string> = {
  memory: "@baton/core",
  redis: "@baton/redis",
  rediss: "@baton/redis",
  redlock: "@baton/redis",
  etcd: "@baton/etcd",
  zookeeper: "@baton/zookeeper",
  postgres: "@baton/postgres",
  postgresql: "@baton/postgres",
  dynamodb: "@baton/dynamodb",
  azblob: "@baton/azure-blob",
  mysql: "@baton/mysql",
  mariadb: "@baton/mysql",
};

/** Options of {@link registerBackend}. */
export interface RegisterBackendOptions {
  /** Checks the adapter's URL options before any I/O (see {@link BackendUrlCheck}). */
  readonly checkUrl?: BackendUrlCheck | undefined;
  /**
   * What the scheme's backends guarantee: the adapter's own guarantees constant. Known at
   * registration, it lets correctness mode refuse a scheme without ordered tokens in
   * `createCoordinator`, before any I/O.
   */
  readonly guarantees?: Guarantees | undefined;
}

const factories = new Map<string, BackendFactory>();
const urlChecks = new Map<string, BackendUrlCheck>();
const registeredGuarantees = new Map<string, Guarantees>();
registerBackend("memory", (url) => new MemoryBackend(memoryOptionsFromUrl(url)), {
  checkUrl: memoryOptionsFromUrl,
  guarantees: MEMORY_GUARANTEES,
});

/**
 * Registers `factory` for `scheme` (without `:`). Adapter packages call this when imported;
 * a third-party backend may register its own scheme. Replaces an earlier registration.
 *
 * @example
 * registerBackend("acme", (url) => new AcmeBackend(url), {
 *   checkUrl: (url) => checkAcmeUrl(url),
 *   guarantees: ACME_GUARANTEES,
 * });
 */
export function registerBackend(
  scheme: string,
  factory: BackendFactory,
  options: RegisterBackendOptions = {},
): void {
  checkScheme(scheme);
  checkFunction(factory, "factory", "must be a function (url) => LockBackend");
  const { checkUrl, guarantees } = options;
  if (checkUrl !== undefined)
    checkFunction(checkUrl, "checkUrl", "must be a function (url) => void");
  factories.set(scheme, factory);
  if (checkUrl === undefined) urlChecks.delete(scheme);
  else urlChecks.set(scheme, checkUrl);
  if (guarantees === undefined) registeredGuarantees.delete(scheme);
  else registeredGuarantees.set(scheme, guarantees);
}

/**
 * Declares that `scheme` is served by `packageName`, loaded on first use (as Baton's own
 * adapters are) when the app has not imported it. For third-party adapters that want lazy
 * loading by URL; the package registers the scheme, with its guarantees, when it loads.
 */
export function declareBackendPackage(scheme: string, packageName: string): void {
  checkScheme(scheme);
  KNOWN[scheme] = packageName;
}

function checkScheme(scheme: string): void {
  if (!/^[a-z][a-z0-9+.-]*$/.test(scheme)) {
    throw new ConfigError("scheme", `must be a lower-case URL scheme without ":", got "${scheme}"`);
  }
}

/**
 * Parses and checks a backend URL without any I/O: the scheme must be registered or one that
 * a Baton adapter serves, and when its adapter is registered (imported), the adapter checks
 * its options too, so a misspelt `?prefx=` fails here. Throws `ConfigError` naming what is
 * wrong (field `url`, or the adapter's option a URL parameter sets, such as `schema`).
 */
export function parseBackendUrl(url: unknown): BackendUrl {
  if (typeof url !== "string" || url.trim() === "") {
    throw new ConfigError(
      "url",
      `must be a backend URL such as "redis://host:6379" or "memory://", got ${typeof url === "string" ? "an empty string" : typeof url}`,
    );
  }
  const parsed = parseUrlParts(url);
  if (!factories.has(parsed.scheme) && KNOWN[parsed.scheme] === undefined) {
    const schemes = [...new Set([...Object.keys(KNOWN), ...factories.keys()])];
    throw new ConfigError(
      "url",
      `unknown scheme "${parsed.scheme}:"; use one of ${schemes.map((s) => `${s}://`).join(", ")}`,
    );
  }
  urlChecks.get(parsed.scheme)?.(parsed);
  return parsed;
}

/**
 * The fencing a URL's backend declares, when its adapter has registered (been imported);
 * `undefined` before that.
 */
export function knownFencing(url: BackendUrl): Guarantees["fencing"] | undefined {
  return registeredGuarantees.get(url.scheme)?.fencing;
}

/** What a URL's backend guarantees, once its adapter has registered. @internal */
export function knownGuarantees(url: BackendUrl): Guarantees | undefined {
  return registeredGuarantees.get(url.scheme);
}

/**
 * Creates the backend a URL names: `memory://` (private) or `memory://NAME` (shared in this
 * process), and the schemes adapter packages register when imported: `redis://`, `rediss://`,
 * `redlock://h1:p1,h2:p2,...` (`import "@baton/redis"`), `etcd://h1:p1,h2:p2`
 * (`import "@baton/etcd"`), `zookeeper://h1:p1,h2:p2/chroot` (`import "@baton/zookeeper"`),
 * `postgres://...` (`import "@baton/postgres"`).
 *
 * Import the adapter once in the app: that is what a bundler sees. An app run by Node without
 * a bundler may leave the import out; the adapter is then loaded by name on first use. A
 * missing adapter package is a `ConfigError` naming the package to install and import.
 */
export async function createBackend(url: string): Promise<LockBackend> {
  const parsed = parseBackendUrl(url);
  const scheme = parsed.scheme;
  let factory = factories.get(scheme);
  const known = KNOWN[scheme];
  if (factory === undefined && known !== undefined) {
    try {
      await import(/* @vite-ignore */ known);
    } catch (cause) {
      throw new ConfigError(
        "url",
        `the "${scheme}:" backend needs the package ${known}: install it (npm install ${known}) and import it once in your app (import "${known}"), which is also what a bundler needs to include it`,
        { cause },
      );
    }
    factory = factories.get(scheme);
  }
  if (factory === undefined) {
    throw new ConfigError("url", noFactoryMessage(scheme, known));
  }
  return await factory(parsed);
}

/**
 * Every copy of this module loaded in the process, by URL. Two copies of `@baton/core` (an app
 * and an adapter that each installed their own) keep two registries, and an adapter registers
 * with its own copy only.
 */
const COPIES_KEY = Symbol.for("@baton/core.registry-copies");
const shared = globalThis as Record<symbol, string[] | undefined>;
const copies: string[] = shared[COPIES_KEY] ?? [];
shared[COPIES_KEY] = copies;
copies.push(import.meta.url);

function noFactoryMessage(scheme: string, known: string | undefined): string {
  if (copies.length > 1) {
    return `no "${scheme}:" backend is registered with this copy of @baton/core; ${copies.length} copies are loaded (${copies.join(", ")}), so the adapter registered with another one. Make the app and its adapters share one @baton/core (npm ls @baton/core; npm dedupe)`;
  }
  return known === undefined
    ? `no backend is registered for "${scheme}:"; import the adapter package that serves it first`
    : `the package ${known} loaded but registered no "${scheme}:" backend; is it a Baton adapter of a matching version?`;
}
