import { domainToASCII } from "node:url";
import { ConfigError } from "./errors.js";

/** One `host[:port]` of a backend URL. */
export interface HostPort {
  /** Host name or address (IPv6 without brackets). */
  readonly host: string;
  /** Port, when given. */
  readonly port: number | undefined;
}

/**
 * A parsed backend URL. The user info and each host follow the WHATWG URL rules (as Node's
 * `URL` reads them), but the authority may list several hosts separated by commas, as
 * cluster backends use: `etcd://h1:2379,h2:2379`, `zookeeper://h1:2181,h2:2181/chroot`,
 * `redlock://h1:6379,h2:6379,h3:6379`.
 *
 * `href` holds any credentials as given: print {@link redactUrl}`(href)`, never `href`.
 */
export interface BackendUrl {
  /** The URL as given, credentials included: never print it (see {@link redactUrl}). */
  readonly href: string;
  /** Scheme without `:`, lower case, e.g. `"etcd"`. */
  readonly scheme: string;
  /** Hosts in the order given (may be empty, e.g. `memory://`). */
  readonly hosts: readonly HostPort[];
  /** Decoded user name, or `""`. */
  readonly username: string;
  /** Decoded password, or `""`. */
  readonly password: string;
  /** Path, `""` or starting with `/`. */
  readonly pathname: string;
  /** Query parameters (each at most once). */
  readonly searchParams: URLSearchParams;
}

const SCHEME = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\//;

/** How to spell the characters that end a user name or password early. */
const ENCODE_HINT =
  'percent-encode "@", ":", "/", "?", "#" and "%" in a user name or password (%40, %3A, %2F, %3F, %23, %25)';

/**
 * Parses a backend URL; throws `ConfigError` (field `url`) naming the part that is wrong.
 * No message quotes a user name, password or anything that may be one (see {@link redactUrl}).
 */
export function parseUrlParts(url: string): BackendUrl {
  const text = url.trim();
  const scheme = SCHEME.exec(text);
  if (scheme === null) {
    throw new ConfigError(
      "url",
      `"${redactUrl(text)}" is not a URL of the form scheme://host:port,...`,
    );
  }
  const rest = text.slice(scheme[0].length);
  if (rest.includes("#")) {
    throw new ConfigError(
      "url",
      `"${redactUrl(text)}" has a "#": a backend URL has no fragment; ${ENCODE_HINT}`,
    );
  }
  // WHATWG: the authority ends at the first "/" or "?"; the user info ends at its last "@".
  const authorityEnd = rest.search(/[/?]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  const tail = authorityEnd === -1 ? "" : rest.slice(authorityEnd);
  if (tail.includes("@")) {
    // An "@" past the host almost always ends a user name or password that holds a "/" or "?".
    throw new ConfigError("url", `"${redactUrl(text)}" has an "@" after the host; ${ENCODE_HINT}`);
  }
  const at = authority.lastIndexOf("@");
  const { username, password } =
    at === -1 ? { username: "", password: "" } : parseUserInfo(authority.slice(0, at), text);
  const hostList = authority.slice(at + 1);
  const hosts = hostList === "" ? [] : hostList.split(",").map((part) => parseHost(part, text));
  const queryStart = tail.indexOf("?");
  const path = queryStart === -1 ? tail : tail.slice(0, queryStart);
  const searchParams = new URLSearchParams(queryStart === -1 ? "" : tail.slice(queryStart + 1));
  const seen = new Set<string>();
  for (const key of searchParams.keys()) {
    if (seen.has(key)) {
      throw new ConfigError("url", `"${redactUrl(text)}" gives the parameter "${key}" twice`);
    }
    seen.add(key);
  }
  return {
    href: url,
    scheme: (scheme[1] as string).toLowerCase(),
    hosts,
    username,
    password,
    pathname: decode(path, () => `"${redactUrl(text)}" has a bad percent-encoding in its path`),
    searchParams,
  };
}

/** The user name and password of `userInfo` (the text before the host's "@"), decoded. */
function parseUserInfo(userInfo: string, url: string): { username: string; password: string } {
  let parsed: URL;
  try {
    parsed = new URL(`baton-userinfo://${userInfo}@host`);
  } catch {
    // Node's error quotes its input, the credentials: never pass it on as a cause.
    throw new ConfigError(
      "url",
      `"${redactUrl(url)}" has a user name or password that is not valid in a URL; ${ENCODE_HINT}`,
    );
  }
  const bad = () =>
    `"${redactUrl(url)}" has a bad percent-encoding in its user name or password; ${ENCODE_HINT}`;
  return { username: decode(parsed.username, bad), password: decode(parsed.password, bad) };
}

/** One entry of the host list: `host`, `host:port`, `[ipv6]` or `[ipv6]:port`. */
function parseHost(part: string, url: string): HostPort {
  // The port is the text after the ":" that follows the host (an IPv6 address in brackets).
  const m = /^(\[[^\]]*\]|[^:]*)(?::([^:]*))?$/.exec(part);
  // Only the host is quoted: what follows a ":" may be a password whose "@" went missing.
  const badHost = () =>
    new ConfigError(
      "url",
      m === null || m[1] === ""
        ? `"${redactUrl(url)}" has an empty or bad host in its host list (expected host or host:port, hosts separated by ",")`
        : `"${redactUrl(url)}" has a bad host "${m[1]}" (expected host or host:port, hosts separated by ",")`,
    );
  if (m === null || m[1] === "") throw badHost();
  const portText = m[2];
  let port: number | undefined;
  if (portText !== undefined && portText !== "") {
    port = /^\d{1,5}$/.test(portText) ? Number(portText) : Number.NaN;
    if (!(port >= 1 && port <= 65_535)) {
      // Digits only: anything else may be the end of a password whose "@" went missing.
      const shown = /^\d+$/.test(portText) ? ` "${portText}"` : "";
      throw new ConfigError(
        "url",
        `"${redactUrl(url)}" has a bad port${shown} (a number from 1 to 65535)`,
      );
    }
  }
  let hostname: string;
  try {
    hostname = new URL(`baton-host://${m[1]}`).hostname;
  } catch {
    throw badHost();
  }
  if (hostname.startsWith("[")) return { host: hostname.slice(1, -1), port };
  // A non-special URL keeps a host as opaque, percent-encoded text; a store wants the name.
  const name = decode(hostname, () => badHost().message);
  if (/^[\x21-\x7e]+$/.test(name)) return { host: name, port };
  const ascii = domainToASCII(name);
  if (ascii === "") throw badHost();
  return { host: ascii, port };
}

/** `decodeURIComponent`, with a `ConfigError` (field `url`) for malformed input. */
function decode(text: string, message: () => string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ConfigError("url", message());
  }
}

const SECRET_PARAM = /pass|secret|token|key|auth|cred/i;

/**
 * A URL fit to print: its user info (user name, password or token) replaced by `***`, a port
 * that is not a number too (a password whose "@host" went missing reads as one), and the
 * values of query parameters that look like secrets (`password=`, `token=`, ...). Works on any
 * string, well-formed or not: everything up to the last "@" counts as user info. Use it
 * wherever a backend URL goes into a message, a log line or an event.
 *
 * @example
 * redactUrl("redis://app:s3cret@cache:6379/0"); // "redis://***@cache:6379/0"
 */
export function redactUrl(url: string): string {
  const text = String(url);
  const scheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.exec(text);
  const start = scheme === null ? 0 : scheme[0].length;
  const at = text.lastIndexOf("@");
  const hostsStart = at < start ? start : at + 1;
  const found = text.slice(hostsStart).search(/[/?#]/);
  const hostsEnd = found === -1 ? text.length : hostsStart + found;
  const hosts = text
    .slice(hostsStart, hostsEnd)
    .split(",")
    .map((entry) => {
      const m = /^(\[[^\]]*\]|[^:[\]]*):(.*)$/.exec(entry);
      return m === null || /^\d*$/.test(m[2] as string) ? entry : `${m[1]}:***`;
    })
    .join(",");
  const before = at < start ? text.slice(0, start) : `${text.slice(0, start)}***@`;
  const after = text.slice(hostsEnd);
  const query = after.indexOf("?");
  if (query === -1) return `${before}${hosts}${after}`;
  const params = after
    .slice(query + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      if (eq === -1 || !SECRET_PARAM.test(pair.slice(0, eq))) return pair;
      return `${pair.slice(0, eq)}=***`;
    });
  return `${before}${hosts}${after.slice(0, query + 1)}${params.join("&")}`;
}
