import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { InspectionSource } from "../inspect/inspection-source.js";
import { Access, TOKEN_COOKIE } from "./access.js";
import type { Feed } from "./feed.js";
import { loginPage } from "./login-page.js";
import { dashboardPage, type PageSettings } from "./page.js";

/** What the dashboard's HTTP server serves. */
export interface DashboardServerOptions extends PageSettings {
  readonly feed: Feed;
  readonly source: InspectionSource;
  /** Required on every request when set (a non-loopback host). */
  readonly token: string | undefined;
  /** Where the server says what it does (forced releases), one line each. */
  readonly log: (line: string) => void;
}

/** The kinds a forced release takes (a job: the lock of its running slot). */
const KINDS = new Set(["lock", "semaphore", "read-write-lock", "election", "job"] as const);
type ReleaseKind = typeof KINDS extends Set<infer K> ? K : never;

/** The largest release request body read, in bytes. */
const MAX_BODY = 16_384;

/** The most bytes an event stream may have waiting to be sent before it is dropped. */
const MAX_BUFFERED = 8 * 1024 * 1024;

/** How often an idle event stream gets a comment, so proxies and browsers keep it open. */
const KEEPALIVE_MS = 15_000;

function securityHeaders(nonce: string): Record<string, string> {
  return {
    "Content-Security-Policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
  };
}

function send(
  response: ServerResponse,
  status: number,
  type: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, {
    "Content-Type": type,
    "Content-Length": Buffer.byteLength(body),
    ...securityHeaders(""),
    ...headers,
  });
  response.end(body);
}

function json(response: ServerResponse, status: number, value: unknown): void {
  send(response, status, "application/json; charset=utf-8", JSON.stringify(value));
}

async function readBody(request: IncomingMessage): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new Error("request body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The dashboard's HTTP server: the page at `/`, its Server-Sent Events at `/events`, forced
 * releases at `POST /release` (only when allowed), and `POST /login` for the token.
 */
export function createDashboardServer(options: DashboardServerOptions): Server {
  const access = new Access(options.token);
  const streams = new Set<ServerResponse>();

  const page = (response: ServerResponse) => {
    const nonce = randomBytes(16).toString("base64");
    send(response, 200, "text/html; charset=utf-8", dashboardPage(options, nonce), {
      ...securityHeaders(nonce),
    });
  };

  const login = async (request: IncomingMessage, response: ServerResponse) => {
    const form = new URLSearchParams(await readBody(request));
    const token = form.get("token") ?? "";
    if (!access.matches(token)) {
      const nonce = randomBytes(16).toString("base64");
      send(
        response,
        401,
        "text/html; charset=utf-8",
        loginPage(nonce, true),
        securityHeaders(nonce),
      );
      return;
    }
    response.writeHead(303, {
      Location: "./",
      "Set-Cookie": `${TOKEN_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`,
      ...securityHeaders(""),
    });
    response.end();
  };

  const events = (request: IncomingMessage, response: ServerResponse) => {
    response.writeHead(200, {
      "Content-Type": "text/event-stream; charset=utf-8",
      Connection: "keep-alive",
      ...securityHeaders(""),
    });
    const { state, timeline } = options.feed.current();
    response.write("retry: 2000\n\nevent: reset\ndata: {}\n\n");
    if (timeline.length > 0)
      response.write(`event: timeline\ndata: ${JSON.stringify(timeline)}\n\n`);
    if (state !== undefined) response.write(`event: state\ndata: ${state}\n\n`);
    streams.add(response);
    const off = options.feed.subscribe(({ state: next, events: happened }) => {
      // A page that stopped reading (a suspended tab, a stalled network) is dropped rather
      // than buffered without bound; its EventSource reconnects and gets the state afresh.
      if (response.writableLength > MAX_BUFFERED) {
        response.destroy();
        return;
      }
      if (happened.length > 0) {
        response.write(`event: timeline\ndata: ${JSON.stringify(happened)}\n\n`);
      }
      response.write(`event: state\ndata: ${next}\n\n`);
    });
    const ping = setInterval(() => response.write(": keep-alive\n\n"), KEEPALIVE_MS);
    ping.unref();
    request.on("close", () => {
      off();
      clearInterval(ping);
      streams.delete(response);
    });
  };

  const release = async (request: IncomingMessage, response: ServerResponse) => {
    if (!options.allowRelease) {
      json(response, 403, { message: "this dashboard was started without --allow-release" });
      return;
    }
    // A cross-site form cannot send JSON with a custom header without the browser asking
    // first, and the server never answers that question: only the page itself gets here.
    if (
      request.headers["x-baton-dashboard"] !== "1" ||
      !(request.headers["content-type"] ?? "").startsWith("application/json")
    ) {
      json(response, 400, { message: "not a request of the dashboard page" });
      return;
    }
    let body: { kind?: unknown; name?: unknown; token?: unknown; reason?: unknown };
    try {
      body = JSON.parse(await readBody(request)) as typeof body;
    } catch {
      json(response, 400, { message: "the body is not JSON" });
      return;
    }
    const { kind, name, token, reason } = body;
    if (
      typeof name !== "string" ||
      typeof reason !== "string" ||
      reason.trim() === "" ||
      !KINDS.has(kind as ReleaseKind) ||
      (token !== undefined && (typeof token !== "string" || !/^\d+$/.test(token)))
    ) {
      json(response, 400, { message: "a release needs kind, name, a reason and a decimal token" });
      return;
    }
    const why = reason.trim();
    try {
      const result = await options.source.forceRelease(name, {
        reason: why,
        kind: kind as ReleaseKind,
        ...(token === undefined ? {} : { token: BigInt(token) }),
      });
      const what = `${kind} "${name}"${token === undefined ? "" : ` token ${token}`}`;
      if (result.released) {
        options.feed.noteRevoked(kind as ReleaseKind, name, result.token?.toString() ?? token, why);
        options.log(`force-released ${what} from the page: ${why}`);
        json(response, 200, { released: true, message: `released ${what}` });
      } else {
        json(response, 200, {
          released: false,
          message: `nothing to release: ${what} is not held`,
        });
      }
    } catch (error) {
      json(response, 500, { released: false, message: (error as Error).message });
    }
  };

  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://dashboard").pathname;
    const handle = async () => {
      if (request.method === "POST" && path === "/login" && access.tokenRequired) {
        return login(request, response);
      }
      if (!access.allows(request)) {
        if (access.tokenRequired && request.method === "GET" && path === "/") {
          const nonce = randomBytes(16).toString("base64");
          return send(
            response,
            401,
            "text/html; charset=utf-8",
            loginPage(nonce, false),
            securityHeaders(nonce),
          );
        }
        return json(response, access.tokenRequired ? 401 : 403, { message: "not allowed" });
      }
      if (request.method === "GET" && path === "/") return page(response);
      if (request.method === "GET" && path === "/events") return events(request, response);
      if (request.method === "POST" && path === "/release") return release(request, response);
      return json(response, 404, { message: "not found" });
    };
    handle().catch((error: unknown) => {
      if (!response.headersSent) json(response, 400, { message: (error as Error).message });
      else response.destroy();
    });
  });
  server.on("close", () => {
    for (const stream of streams) stream.end();
  });
  return server;
}

/** Listens on `host`:`port` (0: a free port); resolves with the port. */
export async function listen(server: Server, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}
