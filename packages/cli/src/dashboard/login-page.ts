import { escapeHtml } from "./html.js";
import { PAGE_STYLE } from "./page-style.js";

/**
 * The page a request without the dashboard's token gets: it asks for the token and sends it
 * once (a form POST); the server answers with a cookie the page's own requests carry.
 */
export function loginPage(nonce: string, wrong: boolean): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>baton dashboard: token</title>
<style nonce="${nonce}">${PAGE_STYLE}
form { max-width: 360px; margin: 15vh auto; padding: 20px; background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
input { width: 100%; padding: 8px; margin: 10px 0; }</style>
</head><body>
<form method="post" action="login">
<h1>baton dashboard</h1>
<label for="token">This dashboard asks for its token (the one it was started with: --token).</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
${wrong ? `<p class="ev-lost">${escapeHtml("That token is not the dashboard's.")}</p>` : ""}
<button type="submit">Open</button>
</form>
</body></html>
`;
}
