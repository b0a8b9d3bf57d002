import "@baton/postgres";
import "@baton/redis";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BackendKind, describeBackend } from "@baton/conformance/harness";
import { type Coordinator, createCoordinator, type Lock, LockLostError } from "@baton/core";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { until } from "./cli-helpers.js";
import { useBatonRuns } from "./support/baton-runs.js";

/** Debian's Chromium (npm test installs it); BATON_CHROMIUM names another. */
const CHROMIUM = process.env.BATON_CHROMIUM ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/** Screenshots of each state the page went through, for a person to look at. */
const SHOTS = fileURLToPath(new URL("../../../test-output/dashboard/", import.meta.url));

/** `baton dashboard` as a process, its page in headless Chromium, a lock held in this process. */
const dashboardSuite = (kind: BackendKind) => (url: string) => {
  const run = useBatonRuns();
  let browser: Browser;
  const coordinators: Coordinator[] = [];
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    mkdirSync(SHOTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    await Promise.all(coordinators.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  const coordinator = (ownerId: string, ttlMs = 6_000) => {
    const c = createCoordinator({ url, ttlMs, ownerId });
    coordinators.push(c);
    return c;
  };
  const prefix = () => `dash-${Math.random().toString(36).slice(2, 8)}/`;

  /** Starts the dashboard for `prefix`, opens its page; resolves once the page is live. */
  const open = async (p: string, extra: string[] = []) => {
    const dashboard = run(["dashboard", p, "--backend", url, "--port", "0", ...extra]);
    let address = "";
    await until(
      () => {
        address = /http:\/\/127\.0\.0\.1:\d+\//.exec(dashboard.output())?.[0] ?? "";
        return address !== "";
      },
      30_000,
      "the dashboard to listen",
    );
    const page = await browser.newPage({ viewport: { width: 1400, height: 820 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    const response = await page.goto(address);
    const bytes = (await response?.body())?.length ?? 0;
    await page.waitForSelector("#status.live", { timeout: 15_000 });
    return { page, bytes, errors, output: dashboard.output };
  };
  const row = (page: Page, name: string) => page.locator(`#locks tr[data-name="${name}"]`);
  const shot = (page: Page, state: string) =>
    page.screenshot({ path: join(SHOTS, `${kind}-${state}.png`) });

  it("shows a lock taken elsewhere with holder and token, its lease moving, a waiter, and its release", async () => {
    const p = prefix();
    const { page, bytes, errors, output } = await open(p);
    const name = `${p}orders`;
    const lock = await coordinator("billing-7f3a").acquire(name, { value: "invoice run" });
    const granted = performance.now();
    await row(page, name).waitFor({ timeout: 10_000 });
    const shownMs = performance.now() - granted;
    const read = await page.locator("#updated").textContent();
    console.log(
      `[dashboard ${kind}] page ${bytes} bytes; lock row shown ${Math.round(shownMs)} ms after its grant (${read})`,
    );
    expect(await row(page, name).locator("td.holder").textContent()).toBe("billing-7f3a");
    expect(await row(page, name).locator("td.token").textContent()).toBe(`${lock.token}`);
    expect(await row(page, name).getAttribute("title")).toBe("billing-7f3a: invoice run");
    await shot(page, "held");

    // The lease bar counts down between updates (and jumps back up when the holder renews).
    const width = () =>
      row(page, name)
        .locator(".bar > i")
        .evaluate((e) => (e as unknown as { style: { width: string } }).style.width);
    const first = await width();
    await until(async () => (await width()) !== first, 5_000, "the lease bar to move");

    const waiting = new AbortController();
    const waiter = coordinator("billing-9c21")
      .acquire(name, { signal: waiting.signal, waitMs: 60_000 })
      .catch(() => undefined);
    await until(
      async () => (await row(page, name).locator("td.waiters").textContent()) === "1",
      15_000,
      "the waiter to show",
    );
    await shot(page, "waiter");
    waiting.abort();
    await waiter;
    await until(
      async () => (await row(page, name).locator("td.waiters").textContent()) === "0",
      15_000,
      "the waiter to leave",
    );
    await lock.release();
    await row(page, name).waitFor({ state: "detached", timeout: 15_000 });
    await page
      .locator(`#timeline li[data-type="released"][data-name="${name}"]`)
      .waitFor({ timeout: 5_000 });
    await shot(page, "released");
    expect(errors).toEqual([]);
    expect(output()).not.toMatch(/password|secret/i);
  });

  it("with --allow-release, a release from the page revokes the holder's lock in its process", async () => {
    const p = prefix();
    const { page, errors } = await open(p, ["--allow-release"]);
    const name = `${p}stuck`;
    const lock: Lock = await coordinator("worker-3").acquire(name);
    await row(page, name).waitFor({ timeout: 10_000 });
    page.once("dialog", (dialog) => dialog.accept("stuck since the deploy"));
    await row(page, name).locator("button.release").click();
    await until(() => lock.signal.aborted, 15_000, "the holder to lose its lock");
    const reason = lock.signal.reason as LockLostError;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(reason.reason).toBe("revoked");
    expect(reason.detail).toBe("stuck since the deploy");
    await row(page, name).waitFor({ state: "detached", timeout: 15_000 });
    const revoked = page.locator(`#timeline li[data-type="revoked"][data-name="${name}"]`);
    await revoked.waitFor({ timeout: 5_000 });
    expect(await revoked.textContent()).toContain("stuck since the deploy");
    await shot(page, "revoked");
    expect(errors).toEqual([]);
  });

  it("stays usable with 1,000 locks held: one page of rows, a filter that finds one", async () => {
    const p = prefix();
    const holderOf = coordinator("bulk-holder", 30_000);
    const names = Array.from({ length: 1_000 }, (_, i) => `${p}lock-${String(i).padStart(4, "0")}`);
    for (let i = 0; i < names.length; i += 50) {
      await Promise.all(names.slice(i, i + 50).map((n) => holderOf.acquire(n)));
    }
    const { page, errors } = await open(p);
    await until(
      async () => (await page.locator("#locks .count").textContent()) === "1000",
      30_000,
      "all 1,000 locks to show",
    );
    expect(await page.locator("#locks tbody tr").count()).toBe(50);
    expect(await page.locator("#locks .pager").textContent()).toContain("1–50 of 1000");
    const updated = (await page.locator("#updated").textContent()) ?? "";
    const filtered = performance.now();
    await page.fill("#filter", "lock-0777");
    await until(
      async () => (await page.locator("#locks tbody tr").count()) === 1,
      5_000,
      "the filter",
    );
    const filterMs = performance.now() - filtered;
    const stateBytes = await page.evaluate(async () => {
      const response = await fetch("events");
      const reader = response.body?.getReader();
      let text = "";
      while (reader && !/event: state\ndata: .*\n\n/.test(text)) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += new TextDecoder().decode(chunk.value);
      }
      await reader?.cancel();
      return (/event: state\ndata: (.*)\n\n/.exec(text)?.[1] ?? "").length;
    });
    const heap = await page.evaluate(
      () =>
        (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory
          ?.usedJSHeapSize ?? 0,
    );
    console.log(
      `[dashboard ${kind}] 1000 locks: ${updated}; state event ${stateBytes} bytes; filter applied in ${Math.round(filterMs)} ms; JS heap ${Math.round(heap / 1e6)} MB`,
    );
    await shot(page, "1000-locks-filtered");
    expect(errors).toEqual([]);
  }, 180_000);
};

const hasBrowser = existsSync(CHROMIUM);
// npm test installs Chromium whenever Redis or PostgreSQL run (scripts/test.mjs): where
// their servers run, a missing browser is a failure that names the command, never a skip.
for (const kind of ["redis", "postgres"] as BackendKind[]) {
  describeBackend(kind, (url) => {
    if (hasBrowser) {
      dashboardSuite(kind)(url);
      return;
    }
    it("baton dashboard in a browser needs Chromium", () => {
      throw new Error(`no Chromium at ${CHROMIUM}: run bash scripts/install-servers.sh chromium`);
    });
  });
}
