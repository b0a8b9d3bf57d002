import { AuthenticationError } from "@baton/core";

/**
 * The server's replies that mean "these credentials will never do": a wrong password or an
 * unknown or disabled user (`WRONGPASS`, and `ERR invalid password` of Redis before 6), or a
 * password the server requires and the client did not give (`NOAUTH`).
 */
const REFUSED = /^(WRONGPASS|NOAUTH|ERR invalid password|ERR invalid username-password)/i;

/**
 * The server's reply when `error` (or, on a Cluster, the last node's error it carries) is a
 * refusal of the credentials; `undefined` otherwise. The reply never contains the password.
 */
export function refusedCredentials(error: unknown): string | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 3; depth++) {
    if (REFUSED.test(e.message)) return e.message;
    e = (e as { lastNodeError?: unknown }).lastNodeError ?? e.cause;
  }
  return undefined;
}

/**
 * The error for credentials `where` refused: an {@link AuthenticationError} naming the host
 * and what the server said, never the password. `field` is the option that carried them.
 */
export function authenticationError(
  field: string,
  where: string,
  reply: string,
  cause: unknown,
): AuthenticationError {
  // NOAUTH comes both when no password was given and, from some client versions, after a
  // wrong one: the hint covers both.
  return new AuthenticationError(
    field,
    `${where} refused to authenticate this client (${reply}); check the user name and password (redis://user:password@host, or redis://:password@host for the default user)`,
    { cause },
  );
}
