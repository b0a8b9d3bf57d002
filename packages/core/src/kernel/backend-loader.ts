import type { LockBackend } from "../contract/backend.js";
import type { BackendUrl } from "../contract/backend-url.js";
import type { Guarantees } from "../contract/guarantees.js";
import {
  backendKindOf,
  checkCorrectness,
  knownGuaranteesOf,
  type ResolvedOptions,
} from "./options.js";
import { createBackend } from "./registry.js";

/** Open coordinators by the backend instance they were given: the last to close closes it. */
const backendUsers = new WeakMap<LockBackend, number>();

/**
 * A coordinator's backend: the instance it was given, or the one its URL names, loaded on
 * first use; and the backend's close it owes when it closes.
 */
export class BackendLoader {
  readonly #options: ResolvedOptions;
  #backend: Promise<LockBackend> | undefined;

  constructor(options: ResolvedOptions) {
    this.#options = options;
    const given = options.backend;
    if (given !== undefined) {
      this.#backend = Promise.resolve(given);
      backendUsers.set(given, (backendUsers.get(given) ?? 0) + 1);
    }
  }

  /** The backend, loaded from the URL on first use. */
  get(): Promise<LockBackend> {
    this.#backend ??= this.#load();
    return this.#backend;
  }

  /** What the backend guarantees, when known without I/O (an instance, or an imported adapter). */
  knownGuarantees(): Guarantees | undefined {
    return knownGuaranteesOf(this.#options.backend, this.#options.url);
  }

  /** The backend's kind, or the URL's scheme while it is not loaded, for error messages. */
  kind(): string {
    return backendKindOf(this.#options.backend, this.#options.url);
  }

  /**
   * The backend's close this coordinator owes: a backend made from its URL, or one it was
   * given (unless `closeBackend: false`) that no other open coordinator uses. Called once,
   * when the coordinator closes.
   */
  owedClose(): (() => Promise<void>) | undefined {
    const given = this.#options.backend;
    if (given !== undefined) {
      const users = (backendUsers.get(given) ?? 1) - 1;
      if (users > 0) backendUsers.set(given, users);
      else backendUsers.delete(given);
      if (users > 0 || !this.#options.closeBackend) return undefined;
      return () => given.close();
    }
    const loading = this.#backend;
    if (loading === undefined) return undefined;
    return async () => {
      const backend = await loading.catch(() => undefined);
      await backend?.close();
    };
  }

  async #load(): Promise<LockBackend> {
    const url = this.#options.url as BackendUrl;
    const backend = await createBackend(url.href);
    if (this.#options.mode === "correctness") {
      checkCorrectness(backend.kind, backend.guarantees.fencing);
    }
    return backend;
  }
}
