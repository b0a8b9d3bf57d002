import { isAddressInUse } from "./server-start-error.js";

/** How many times a start is tried when its freshly found ports get taken. */
export const PORT_ATTEMPTS = 3;

/**
 * Runs `start`, and runs it again (it should pick new free ports) when it
 * fails with "address already in use": a free port can be taken between the
 * lookup and the server's bind.
 *
 * @param start - starts the servers; receives the attempt number from 1
 */
export async function withPortRetry<T>(start: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await start(attempt);
    } catch (error) {
      if (attempt >= PORT_ATTEMPTS || !isAddressInUse(error)) {
        throw error;
      }
    }
  }
}
