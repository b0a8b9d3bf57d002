import { request, type Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { Feed } from "../src/dashboard/feed.js";
import { createDashboardServer, listen } from "../src/dashboard/server.js";
import type { InspectionSource } from "../src/inspect/inspection-source.js";

const released: string[] = [];
const source: InspectionSource = {
  async *list() {
    yield { kind: "lock", name: "orders", holders: [{ ownerId: "w1", token: 5n }] };
  },
  async forceRelease(name, { reason }) {
    released.push(`${name}: ${reason}`);
    return { name, released: true, space: "lock", token: 5n, scope: "grant" };
  },
};

const open: { server: Server; feed: Feed }[] = [];
afterEach(async () => {
  for (const { server, feed } of open.splice(0)) {
    await feed.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
  released.length = 0;
});

async function dashboard(options: { token?: string; allowRelease?: boolean } = {}) {
  const feed = new Feed(source, undefined, 200);
  const server = createDashboardServer({
    backend: "redis://127.0.0.1:6379",
    prefix: undefined,
    allowRelease: options.allowRelease ?? false,
    feed,
    source,
    token: options.token,
    log: () => undefined,
  });
  const port = await listen(server, "127.0.0.1", 0);
  feed.start();
  open.push({ server, feed });
  return `http://127.0.0.1:${port}`;
}

const releaseBody = JSON.stringify({ kind: "lock", name: "orders", token: "5", reason: "stuck" });
const releaseHeaders = { "Content-Type": "application/json", "X-Baton-Dashboard": "1" };

describe("the dashboard's access checks", () => {
  it("with a token, answers every request without it with 401, the page with a form asking for it", async () => {
    const base = await dashboard({ token: "s3cret-token", allowRelease: true });
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(401);
    const html = await page.text();
    expect(html).toContain('name="token"');
    expect(html).not.toContain("orders");
    expect((await fetch(`${base}/events`)).status).toBe(401);
    const post = await fetch(`${base}/release`, {
      method: "POST",
      headers: releaseHeaders,
      body: releaseBody,
    });
    expect(post.status).toBe(401);
    expect(released).toEqual([]);
    const wrong = await fetch(`${base}/events`, { headers: { Authorization: "Bearer nope-nope" } });
    expect(wrong.status).toBe(401);
  });

  it("with a token, lets in the page's cookie after the form, and a bearer token", async () => {
    const base = await dashboard({ token: "s3cret-token" });
    const login = await fetch(`${base}/login`, {
      method: "POST",
      body: new URLSearchParams({ token: "s3cret-token" }),
      redirect: "manual",
    });
    expect(login.status).toBe(303);
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] as string;
    expect(cookie).toMatch(/^baton_dashboard=/);
    const page = await fetch(`${base}/`, { headers: { Cookie: cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("Timeline");
    const events = await fetch(`${base}/events`, {
      headers: { Authorization: "Bearer s3cret-token" },
    });
    expect(events.status).toBe(200);
    const reader = events.body?.getReader();
    let text = "";
    while (!text.includes('"name":"orders"')) {
      const chunk = await reader?.read();
      if (chunk === undefined || chunk.done) break;
      text += new TextDecoder().decode(chunk.value);
    }
    await reader?.cancel();
    expect(text).toContain('"token":"5"');
  });

  it("without a token, refuses a request whose Host is not a loopback name", async () => {
    const base = await dashboard();
    expect((await fetch(`${base}/`)).status).toBe(200);
    // fetch() cannot set Host; a page elsewhere reaching the port by DNS rebinding sends its own.
    const rebound = await new Promise<number>((resolve, reject) => {
      const call = request(`${base}/`, { headers: { Host: "attacker.example:80" } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      call.on("error", reject);
      call.end();
    });
    expect(rebound).toBe(403);
  });

  it("refuses a forced release unless started with --allow-release, and one not from the page", async () => {
    const closed = await dashboard();
    const refused = await fetch(`${closed}/release`, {
      method: "POST",
      headers: releaseHeaders,
      body: releaseBody,
    });
    expect(refused.status).toBe(403);
    const base = await dashboard({ allowRelease: true });
    const form = await fetch(`${base}/release`, {
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: releaseBody,
    });
    expect(form.status).toBe(400);
    expect(released).toEqual([]);
    const ok = await fetch(`${base}/release`, {
      method: "POST",
      headers: releaseHeaders,
      body: releaseBody,
    });
    expect(ok.status).toBe(200);
    expect(released).toEqual(["orders: stuck"]);
  });

  it("serves a page that loads nothing from elsewhere, under a Content-Security-Policy", async () => {
    const base = await dashboard();
    const page = await fetch(`${base}/`);
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).not.toMatch(/(src|href)="https?:/);
    expect(html).not.toMatch(/@import|url\(/);
  });
});
