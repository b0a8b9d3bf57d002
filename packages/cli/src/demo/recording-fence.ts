import { MemoryFence, StaleTokenError } from "@baton/core";

/** A `MemoryFence` that also tells who it turned away, for the demo's timeline. */
export class RecordingFence extends MemoryFence {
  readonly #onRejected: (token: bigint) => void;

  constructor(onRejected: (token: bigint) => void) {
    super();
    this.#onRejected = onRejected;
  }

  override async write<T>(
    resource: string,
    token: bigint,
    apply: () => T | Promise<T>,
  ): Promise<T> {
    try {
      return await super.write(resource, token, apply);
    } catch (error) {
      if (error instanceof StaleTokenError) this.#onRejected(token);
      throw error;
    }
  }
}
