import type { LockBackend } from "./backend.js";
import { type BackendUrl, parseUrlParts } from "./backend-url.js";
import { ConfigError } from "./errors.js";
import type { Guarantees } from "./guarantees.js";
import { MemoryBackend } from "./memory-backend.js";
import { MemoryStore } from "./memory-store.js";

/** Builds a backend from a parsed URL. Adapters register one per scheme. */
export type BackendFactory = (url: BackendUrl) => LockBackend | Promise<LockBackend>;

/** A scheme an adapter package serves, known before that package is loaded. */
interface KnownScheme {
  /** The package that registers it. */
  readonly packageName: string;
  /** The fencing it declares, so correctness mode can refuse it before any I/O. */
  readonly fencing: Guarantees["fencing"];
}

const KNOWN: Record<string, KnownScheme> = {
  memory: { packageName: "@baton/core", fencing: "monotonic" },
  redis: { packageName: "@baton/redis", fencing: "single-node" },
  rediss: { packageName: "@baton/redis", fencing: "single-node" },
  redlock: { packageName: "@baton/redis", fencing: "none" },
  etcd: { packageName: "@baton/etcd", fencing: "monotonic" },
  zookeeper: { packageName: "@baton/zookeeper", fencing: "monotonic" },
  postgres: { packageName: "@baton/postgres", fencing: "monotonic" },
  postgresql: { packageName: "@baton/postgres", fencing: "monotonic" },
};

const factories = new Map<string, BackendFactory>();
const namedMemoryStores = new Map<string, MemoryStore>();

factories.set("memory", (url) => {
  const name = (url.hosts.map((h) => h.host).join(",") + url.pathname).replace(/\/+$/, "");
  if (name === "") return new MemoryBackend();
  let store = namedMemoryStores.get(name);
  if (store === undefined) {
    store = new MemoryStore();
    namedMemoryStores.set(name, store);
  }
  return new MemoryBackend({ store });
});

/**
 * Registers `factory` for `scheme` (without `:`). Adapter packages call this when imported;
 * a third-party backend may register its own scheme. Replaces an earlier registration.
 */
export function registerBackend(scheme: string, factory: BackendFactory): void {
  if (!/^[a-z][a-z0-9+.-]*$/.test(scheme)) {
    throw new ConfigError("scheme", `must be a lower-case URL scheme without ":", got "${scheme}"`);
  }
  factories.set(scheme, factory);
}

/**
 * Declares that `scheme` is served by `packageName`, loaded on first use (as Baton's own
 * adapters are). `fencing`, when given, lets correctness mode refuse the scheme before any I/O.
 * For third-party adapters that want lazy loading by URL.
 */
export function declareBackendPackage(
  scheme: string,
  packageName: string,
  fencing?: Guarantees["fencing"],
): void {
  if (!/^[a-z][a-z0-9+.-]*$/.test(scheme)) {
    throw new ConfigError("scheme", `must be a lower-case URL scheme without ":", got "${scheme}"`);
  }
  KNOWN[scheme] = { packageName, fencing: fencing ?? "none" };
  if (fencing === undefined) delete (KNOWN[scheme] as { fencing?: unknown }).fencing;
}

/**
 * Parses and checks a backend URL without any I/O: the scheme must be registered or one that
 * a Baton adapter serves. Throws `ConfigError` (field `url`) naming what is wrong.
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
  return parsed;
}

/**
 * The fencing a URL's backend declares, when it is known without loading the adapter
 * (Baton's own schemes); `undefined` for third-party schemes.
 */
export function knownFencing(url: BackendUrl): Guarantees["fencing"] | undefined {
  return KNOWN[url.scheme]?.fencing;
}

/**
 * Creates the backend a URL names, loading its adapter package when needed:
 * `memory://` (private) or `memory://NAME` (shared in this process), `redis://`, `rediss://`,
 * `redlock://h1:p1,h2:p2,...`, `etcd://h1:p1,h2:p2`, `zookeeper://h1:p1,h2:p2/chroot`,
 * `postgres://...`. A missing adapter package is a `ConfigError` naming the package to install.
 */
export async function createBackend(url: string): Promise<LockBackend> {
  const parsed = parseBackendUrl(url);
  const scheme = parsed.scheme;
  let factory = factories.get(scheme);
  const known = KNOWN[scheme];
  if (factory === undefined && known !== undefined) {
    try {
      await import(known.packageName);
    } catch (cause) {
      throw new ConfigError(
        "url",
        `the "${scheme}:" backend needs the package ${known.packageName}; install it (npm install ${known.packageName})`,
        { cause },
      );
    }
    factory = factories.get(scheme);
  }
  if (factory === undefined) {
    throw new ConfigError(
      "url",
      known === undefined
        ? `no backend is registered for "${scheme}:"`
        : `the package ${known.packageName} loaded but registered no "${scheme}:" backend; is it a Baton adapter of a matching version?`,
    );
  }
  return await factory(parsed);
}
