import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";

/** The cookie the page keeps the dashboard's token in, once it was typed in. */
export const TOKEN_COOKIE = "baton_dashboard";

/** True when `host` (as --host gives it) is a loopback address or localhost. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  return bare === "::1";
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/**
 * Who may use the dashboard: with a token, a request carrying it (`Authorization: Bearer T`
 * or the page's cookie); without one (loopback only), any request whose Host header names
 * a loopback address, so a web page elsewhere cannot reach it by DNS rebinding.
 */
export class Access {
  readonly #token: Buffer | undefined;

  constructor(token: string | undefined) {
    this.#token = token === undefined ? undefined : digest(token);
  }

  /** True when a token is required. */
  get tokenRequired(): boolean {
    return this.#token !== undefined;
  }

  /** True when `candidate` is the token (compared in constant time). */
  matches(candidate: string): boolean {
    return this.#token !== undefined && timingSafeEqual(digest(candidate), this.#token);
  }

  /** True when `request` may see the dashboard. */
  allows(request: IncomingMessage): boolean {
    if (this.#token === undefined) {
      const host = request.headers.host ?? "";
      return isLoopback(host.replace(/:\d+$/, ""));
    }
    const auth = request.headers.authorization;
    if (auth?.startsWith("Bearer ") && this.matches(auth.slice(7))) return true;
    const cookie = cookieValue(request.headers.cookie, TOKEN_COOKIE);
    return cookie !== undefined && this.matches(cookie);
  }
}

/** The value of cookie `name` in a Cookie header. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
