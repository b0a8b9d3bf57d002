import type { Holder } from "@baton/core";

/**
 * The string stored under a lock key: `<sessionId>:<grantId>\n<ownerId>[\n<value>]`.
 *
 * The first line identifies the exact grant (the session that holds it, and the fencing token
 * for `redis://` or a per-session grant number for `redlock://`), so owner checks are by
 * session and grant, never by owner id alone. Owner ids and values never hold control
 * characters (core rejects them), and the value comes last, so parsing is unambiguous.
 */

/** The part of a payload after the grant id: `\n<ownerId>[\n<value>]`. */
export function payloadTail(ownerId: string, value: string | undefined): string {
  return value === undefined ? `\n${ownerId}` : `\n${ownerId}\n${value}`;
}

/** The owner-check prefix of one grant: `<sessionId>:<grantId>\n`. */
export function grantPrefix(sessionId: string, grantId: bigint | number): string {
  return `${sessionId}:${grantId}\n`;
}

/** The owner-check prefix of any grant of one session: `<sessionId>:`. */
export function sessionPrefix(sessionId: string): string {
  return `${sessionId}:`;
}

/**
 * Parses a stored payload into a holder. `withToken: false` (Redlock) reports token 0, since
 * the grant id there is a private counter, not a fencing token. `null` for a foreign value.
 */
export function parsePayload(payload: string, withToken: boolean): Holder | null {
  const firstBreak = payload.indexOf("\n");
  if (firstBreak < 0) return null;
  const head = payload.slice(0, firstBreak);
  const colon = head.lastIndexOf(":");
  if (colon < 0) return null;
  const grantId = head.slice(colon + 1);
  if (!/^\d+$/.test(grantId)) return null;
  const rest = payload.slice(firstBreak + 1);
  const secondBreak = rest.indexOf("\n");
  const ownerId = secondBreak < 0 ? rest : rest.slice(0, secondBreak);
  const token = withToken ? BigInt(grantId) : 0n;
  return secondBreak < 0
    ? { ownerId, token }
    : { ownerId, token, value: rest.slice(secondBreak + 1) };
}
