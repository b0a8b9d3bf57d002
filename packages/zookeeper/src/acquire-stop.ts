import { type BackendAcquireOptions, linkSignals } from "@baton/core";

/**
 * What an acquire's calls stop on: the session's end, and the caller's signal too once the
 * acquire waits. The link to the caller's signal is made on the first wait, so a first try
 * that is granted reads no signal and links none (see docs/hot-path.md, "ZooKeeper").
 */
export class AcquireStop {
  /** The signal of the calls now: the session's end until the first wait, then the link. */
  current: AbortSignal;
  readonly #options: BackendAcquireOptions;
  #link: ReturnType<typeof linkSignals> | undefined;

  constructor(options: BackendAcquireOptions, ended: AbortSignal) {
    this.#options = options;
    this.current = ended;
  }

  /** The signal of a wait: aborts when the caller gives up or the session ends. */
  waiting(): AbortSignal {
    if (this.#link === undefined) {
      this.#link = linkSignals([this.#options.signal, this.current]);
      this.current = this.#link.signal;
    }
    return this.#link.signal;
  }

  dispose(): void {
    this.#link?.dispose();
  }
}
