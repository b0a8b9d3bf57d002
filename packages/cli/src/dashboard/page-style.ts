/** The dashboard page's style sheet (inline in the page; no font or image is fetched). */
export const PAGE_STYLE = `
:root { color-scheme: light dark; --bg: #f7f7f5; --fg: #1d1d1b; --muted: #6b6b66; --line: #deddd8;
  --card: #fff; --accent: #2f6fdb; --ok: #2e8b57; --warn: #c98a00; --bad: #c0392b; --hl: #fff4c2; }
@media (prefers-color-scheme: dark) { :root { --bg: #16171a; --fg: #e6e6e3; --muted: #9a9a95;
  --line: #2c2e33; --card: #1e2024; --accent: #6b9bef; --hl: #3b3520; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; flex-wrap: wrap; gap: 12px 24px; align-items: center; padding: 12px 20px;
  border-bottom: 1px solid var(--line); background: var(--card); position: sticky; top: 0; z-index: 1; }
header h1 { font-size: 16px; margin: 0; }
header .meta { color: var(--muted); font-size: 13px; }
#status::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%;
  background: var(--warn); margin-right: 6px; }
#status.live::before { background: var(--ok); }
#status.down::before { background: var(--bad); }
#filter { margin-left: auto; padding: 6px 10px; border: 1px solid var(--line); border-radius: 6px;
  background: var(--bg); color: var(--fg); min-width: 240px; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 340px; gap: 20px; padding: 20px; }
@media (max-width: 1000px) { main { grid-template-columns: 1fr; } }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; margin-bottom: 20px; overflow: hidden; }
section h2 { font-size: 14px; margin: 0; padding: 10px 14px; border-bottom: 1px solid var(--line);
  display: flex; gap: 10px; align-items: baseline; }
section h2 .count { color: var(--muted); font-weight: normal; }
.pager { margin-left: auto; font-weight: normal; font-size: 12px; color: var(--muted); }
.pager button { font-size: 12px; padding: 1px 8px; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 6px 14px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { font-size: 12px; font-weight: 600; color: var(--muted); }
td.name { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; max-width: 280px; overflow: hidden; text-overflow: ellipsis; }
td.token { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
tr.changed td { background: var(--hl); transition: background 0.3s; }
tr:last-child td { border-bottom: 0; }
.empty { padding: 10px 14px; color: var(--muted); }
.bar { display: inline-block; width: 90px; height: 8px; border-radius: 4px; background: var(--line);
  vertical-align: middle; margin-right: 8px; overflow: hidden; }
.bar > i { display: block; height: 100%; background: var(--ok); width: 0; }
.bar.low > i { background: var(--warn); }
.bar.out > i { background: var(--bad); }
.permits > i { background: var(--accent); }
.state-done { color: var(--ok); } .state-failed { color: var(--bad); } .state-running { color: var(--accent); }
button { font: inherit; border: 1px solid var(--line); background: var(--bg); color: var(--fg); border-radius: 5px; cursor: pointer; }
button.release { color: var(--bad); padding: 1px 8px; }
button:disabled { opacity: 0.4; cursor: default; }
#timeline ol { list-style: none; margin: 0; padding: 0; max-height: 70vh; overflow: auto; }
#timeline li { padding: 6px 14px; border-bottom: 1px solid var(--line); font-size: 13px; }
#timeline time { color: var(--muted); font-family: ui-monospace, monospace; margin-right: 6px; }
.ev { font-weight: 600; }
.ev-acquired, .ev-elected { color: var(--ok); } .ev-released { color: var(--muted); }
.ev-lost, .ev-revoked { color: var(--bad); } .ev-job { color: var(--accent); }
#notice { padding: 8px 20px; display: none; }
#notice.show { display: block; background: var(--hl); }
`;
