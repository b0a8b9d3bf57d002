import { escapeHtml, scriptJson } from "./html.js";
import { PAGE_SCRIPT } from "./page-script.js";
import { PAGE_STYLE } from "./page-style.js";

/** What the page shows about the dashboard itself. */
export interface PageSettings {
  /** The backend URL with its credentials hidden (`redactUrl`). */
  readonly backend: string;
  /** The prefix the dashboard lists, if any. */
  readonly prefix: string | undefined;
  /** True when the page offers a forced release. */
  readonly allowRelease: boolean;
}

/**
 * The dashboard: one self-contained HTML page, its style and script inline, nothing fetched
 * but its own Server-Sent Events and release calls. `nonce` is the response's
 * Content-Security-Policy nonce.
 */
export function dashboardPage(settings: PageSettings, nonce: string): string {
  const title = `baton · ${settings.backend}${settings.prefix ? ` · ${settings.prefix}` : ""}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${PAGE_STYLE}</style>
</head><body>
<header><h1>baton</h1>
<span class="meta">${escapeHtml(settings.backend)}${settings.prefix ? ` · prefix <b>${escapeHtml(settings.prefix)}</b>` : ""}</span>
<span class="meta" id="status">connecting</span><span class="meta" id="updated"></span>
<input id="filter" type="search" placeholder="Filter by name or holder" autocomplete="off" aria-label="Filter by name or holder">
</header>
<div id="notice" role="status"></div>
<main><div>
${table("locks", "Locks", ["Name", "Kind", "Holder", "Token", "Held", "Lease", "Waiters", ""])}
${table("elections", "Elections", ["Name", "Leader", "Term", "Leading for", "Lease", "Candidates waiting", ""])}
${table("semaphores", "Semaphores", ["Name", "Permits used", "Holders", "Waiters"])}
${table("jobs", "Jobs", ["Name", "Running now", "Last slots", ""])}
</div>
<section id="timeline"><h2>Timeline <span class="count">0</span></h2><ol></ol></section>
</main>
<script id="cfg" type="application/json">${scriptJson({ allowRelease: settings.allowRelease })}</script>
<script nonce="${nonce}">${PAGE_SCRIPT}</script>
</body></html>
`;
}

function table(id: string, heading: string, columns: readonly string[]): string {
  const head = columns.map((c) => `<th>${escapeHtml(c)}</th>`).join("");
  return (
    `<section id="${id}"><h2>${heading} <span class="count">0</span><span class="pager"></span></h2>` +
    `<table><thead><tr>${head}</tr></thead><tbody></tbody></table><div class="empty">none</div></section>`
  );
}
