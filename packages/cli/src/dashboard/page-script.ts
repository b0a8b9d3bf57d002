/**
 * The dashboard page's script (inline in the page): reads the state and the timeline from
 * the server's Server-Sent Events, renders one page of each table (filtered by the box at the
 * top), counts the lease bars down between updates, and asks for a reason before a forced
 * release. Plain ES2017 in a string: the page runs it as is.
 */
export const PAGE_SCRIPT = String.raw`
(function () {
  "use strict";
  var cfg = JSON.parse(document.getElementById("cfg").textContent);
  var PAGE = 50;
  var state = { items: [], at: 0, error: null, truncated: false };
  var receivedAt = performance.now();
  var timeline = [];
  var maxLeft = new Map();
  var signatures = new Map();
  var changedAt = new Map();
  var pages = {};
  var filter = "";

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function dur(ms) {
    if (ms === undefined || ms === null || !isFinite(ms)) return "-";
    var v = Math.max(0, ms);
    if (v < 1000) return Math.round(v) + " ms";
    if (v < 60000) return (v / 1000).toFixed(1) + " s";
    var s = Math.floor(v / 1000);
    if (v < 3600000) return Math.floor(s / 60) + " m " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " m";
  }
  function key(it) { return it.kind + "\u0000" + it.name; }
  function owner(h) { return h.foreign ? h.foreign + ": " + (h.ownerId || "?") : h.ownerId; }
  function signature(it) {
    var last = it.slots && it.slots[0];
    return JSON.stringify([it.holders.map(function (h) { return [h.ownerId, h.token, h.permits, h.mode]; }),
      it.waiters ? it.waiters.count : 0, it.permits, last ? [last.slot, last.record.state, last.record.attempt] : null]);
  }
  function matches(it) {
    if (filter === "") return true;
    if (it.name.toLowerCase().indexOf(filter) >= 0) return true;
    return it.holders.some(function (h) { return owner(h).toLowerCase().indexOf(filter) >= 0; });
  }

  function leaseBar(it, h) {
    var wrap = el("span");
    if (h.remainingMs === undefined || h.remainingMs === null) { wrap.textContent = "-"; return wrap; }
    var k = it.kind + "\u0000" + it.name + "\u0000" + h.token + "\u0000" + h.ownerId;
    var max = Math.max(maxLeft.get(k) || 0, h.remainingMs);
    maxLeft.set(k, max);
    var bar = el("span", "bar lease");
    bar.dataset.left = String(h.remainingMs);
    bar.dataset.max = String(max);
    bar.appendChild(el("i"));
    wrap.appendChild(bar);
    wrap.appendChild(el("span", "left"));
    return wrap;
  }
  function tickBars() {
    var gone = performance.now() - receivedAt;
    var bars = document.querySelectorAll(".bar.lease");
    for (var i = 0; i < bars.length; i++) {
      var b = bars[i];
      var left = Math.max(0, Number(b.dataset.left) - gone);
      var frac = Number(b.dataset.max) > 0 ? left / Number(b.dataset.max) : 0;
      b.firstChild.style.width = (frac * 100).toFixed(1) + "%";
      b.classList.toggle("low", frac < 0.34 && left > 0);
      b.classList.toggle("out", left <= 0);
      b.nextSibling.textContent = dur(left);
    }
  }
  function releaseButton(it, h) {
    if (!cfg.allowRelease || !h) return el("span");
    var b = el("button", "release", "Release");
    b.title = "Force-release this grant";
    b.addEventListener("click", function () { release(it, h, b); });
    return b;
  }
  function release(it, h, button) {
    var reason = window.prompt("Force-release " + it.kind + " \"" + it.name + "\" held by " + owner(h) +
      (h.token !== undefined ? " (token " + h.token + ")" : "") + ".\nReason (told to the holder):", "");
    if (reason === null || reason.trim() === "") return;
    button.disabled = true;
    fetch("release", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Baton-Dashboard": "1" },
      body: JSON.stringify({ kind: it.kind, name: it.name, token: h.token, reason: reason.trim() })
    }).then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
      .then(function (r) { notice(r.body.message || (r.ok ? "released" : "failed")); })
      .catch(function (e) { notice("release failed: " + e.message); })
      .then(function () { button.disabled = false; });
  }
  function notice(text) {
    var n = $("notice");
    n.textContent = text;
    n.className = "show";
    clearTimeout(notice.timer);
    notice.timer = setTimeout(function () { n.className = ""; }, 8000);
  }

  var SECTIONS = [
    { id: "locks", kinds: ["lock", "read-write-lock"],
      head: ["Name", "Kind", "Holder", "Token", "Held", "Lease", "Waiters", ""],
      cells: function (it) {
        var h = it.holders[0];
        var kind = it.kind === "lock" ? "lock" : "rw " + (h && h.mode ? h.mode : "");
        var holder = h ? owner(h) + (it.holders.length > 1 ? " +" + (it.holders.length - 1) : "") : "-";
        return [[it.name, "name"], [kind], [holder, "holder"], [h && h.token !== undefined ? h.token : "-", "token"],
          [h ? dur(h.heldMs) : "-", "held"], [h ? leaseBar(it, h) : "-", "lease"], [waiters(it), "waiters"],
          [releaseButton(it, h)]];
      } },
    { id: "semaphores", kinds: ["semaphore"],
      head: ["Name", "Permits used", "Holders", "Waiters"],
      cells: function (it) {
        var used = it.permits ? it.permits.used : it.holders.length;
        var limit = it.permits ? it.permits.limit : 0;
        var cell = el("span");
        var bar = el("span", "bar permits");
        var fill = el("i");
        fill.style.width = (limit > 0 ? (100 * used) / limit : 0).toFixed(1) + "%";
        bar.appendChild(fill);
        cell.appendChild(bar);
        cell.appendChild(el("span", "", used + " / " + (limit || "?")));
        var holders = it.holders.map(function (h) { return owner(h) + (h.permits > 1 ? " \u00d7" + h.permits : ""); }).join(", ");
        return [[it.name, "name"], [cell, "permits"], [holders || "-", "holder"], [waiters(it), "waiters"]];
      } },
    { id: "elections", kinds: ["election"],
      head: ["Name", "Leader", "Term", "Leading for", "Lease", "Candidates waiting", ""],
      cells: function (it) {
        var h = it.holders[0];
        return [[it.name, "name"], [h ? owner(h) : "no leader", "holder"], [h && h.token !== undefined ? h.token : "-", "token"],
          [h ? dur(h.heldMs) : "-", "held"], [h ? leaseBar(it, h) : "-", "lease"], [waiters(it), "waiters"], [releaseButton(it, h)]];
      } },
    { id: "jobs", kinds: ["job"],
      head: ["Name", "Running now", "Last slots"],
      cells: function (it) {
        var h = it.holders[0];
        var slots = el("span");
        (it.slots || []).slice(0, 3).forEach(function (s, i) {
          if (i > 0) slots.appendChild(document.createTextNode(" \u00b7 "));
          slots.appendChild(document.createTextNode(s.slot + " "));
          var st = el("span", "state-" + s.record.state, s.record.state);
          st.title = "attempt " + s.record.attempt + ", token " + s.record.token + ", by " + s.record.holder +
            (s.record.error ? "\n" + s.record.error : "");
          slots.appendChild(st);
        });
        if (!it.slots || it.slots.length === 0) slots.textContent = "-";
        return [[it.name, "name"], [h ? owner(h) + " (token " + h.token + ")" : "-", "holder"], [slots, "slots"], [releaseButton(it, h)]];
      } }
  ];
  function waiters(it) { return it.waiters ? it.waiters.count : 0; }

  function render() {
    var now = performance.now();
    SECTIONS.forEach(function (s) {
      var all = state.items.filter(function (it) { return s.kinds.indexOf(it.kind) >= 0; });
      var shown = all.filter(matches);
      var pageCount = Math.max(1, Math.ceil(shown.length / PAGE));
      var page = Math.min(pages[s.id] || 0, pageCount - 1);
      pages[s.id] = page;
      var box = $(s.id);
      box.querySelector(".count").textContent = shown.length === all.length ? String(all.length) : shown.length + " of " + all.length;
      var pager = box.querySelector(".pager");
      pager.replaceChildren();
      if (pageCount > 1) {
        var prev = el("button", "", "\u2039");
        prev.disabled = page === 0;
        prev.addEventListener("click", function () { pages[s.id] = page - 1; render(); });
        var next = el("button", "", "\u203a");
        next.disabled = page >= pageCount - 1;
        next.addEventListener("click", function () { pages[s.id] = page + 1; render(); });
        pager.append(prev, " " + (page * PAGE + 1) + "\u2013" + Math.min(shown.length, (page + 1) * PAGE) + " of " + shown.length + " ", next);
      }
      var body = box.querySelector("tbody");
      var rows = shown.slice(page * PAGE, (page + 1) * PAGE).map(function (it) {
        var tr = el("tr");
        tr.dataset.kind = it.kind;
        tr.dataset.name = it.name;
        if (now - (changedAt.get(key(it)) || -1e9) < 3000) tr.className = "changed";
        var values = it.holders.filter(function (h) { return h.value !== undefined; });
        if (values.length > 0) tr.title = values.map(function (h) { return owner(h) + ": " + h.value; }).join("\n");
        s.cells(it).forEach(function (c) {
          var td = el("td", c[1] || "");
          if (c[0] instanceof Node) td.appendChild(c[0]); else td.textContent = String(c[0]);
          tr.appendChild(td);
        });
        return tr;
      });
      body.replaceChildren.apply(body, rows);
      box.querySelector(".empty").style.display = shown.length === 0 ? "" : "none";
    });
    tickBars();
  }

  function renderTimeline() {
    var list = $("timeline").querySelector("ol");
    var shown = timeline.filter(function (e) {
      return filter === "" || e.name.toLowerCase().indexOf(filter) >= 0 || (e.owner || "").toLowerCase().indexOf(filter) >= 0;
    });
    var items = shown.slice(-200).reverse().map(function (e) {
      var li = el("li");
      li.dataset.type = e.type;
      li.dataset.name = e.name;
      li.appendChild(el("time", "", new Date(e.at).toLocaleTimeString()));
      li.appendChild(el("span", "ev ev-" + e.type, e.type === "job" ? "job ran" : e.type));
      li.appendChild(document.createTextNode(" " + e.kind + " \"" + e.name + "\"" +
        (e.owner ? " \u2014 " + e.owner : "") + (e.token ? ", token " + e.token : "") + (e.detail ? ", " + e.detail : "")));
      return li;
    });
    list.replaceChildren.apply(list, items);
    $("timeline").querySelector(".count").textContent = shown.length === timeline.length ? String(timeline.length) : shown.length + " of " + timeline.length;
  }

  function onState(text) {
    var next = JSON.parse(text);
    var now = performance.now();
    var present = new Map();
    next.items.forEach(function (it) {
      var k = key(it);
      var sig = signature(it);
      present.set(k, true);
      if (signatures.has(k) && signatures.get(k) !== sig) changedAt.set(k, now);
      if (!signatures.has(k) && state.at !== 0) changedAt.set(k, now);
      signatures.set(k, sig);
    });
    signatures.forEach(function (_v, k) { if (!present.has(k)) { signatures.delete(k); changedAt.delete(k); } });
    state = next;
    receivedAt = now;
    $("updated").textContent = next.items.length + (next.items.length === 1 ? " name" : " names") + (next.truncated ? " (cut short)" : "") +
      ", read in " + (next.tookMs === null ? "-" : next.tookMs + " ms") + ", at " + new Date(next.at).toLocaleTimeString();
    if (next.error) { $("status").className = "down"; $("status").textContent = "store unreachable: " + next.error; }
    else { $("status").className = "live"; $("status").textContent = "live"; }
    render();
  }

  $("filter").addEventListener("input", function (e) {
    filter = e.target.value.trim().toLowerCase();
    Object.keys(pages).forEach(function (k) { pages[k] = 0; });
    render();
    renderTimeline();
  });
  setInterval(tickBars, 200);

  var source = new EventSource("events");
  source.addEventListener("state", function (e) { onState(e.data); });
  source.addEventListener("timeline", function (e) {
    timeline = timeline.concat(JSON.parse(e.data));
    if (timeline.length > 500) timeline = timeline.slice(-500);
    renderTimeline();
  });
  source.addEventListener("reset", function () { timeline = []; });
  source.onerror = function () { $("status").className = "down"; $("status").textContent = "reconnecting"; };
})();
`;
