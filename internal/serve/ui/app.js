// The seqbox dashboard: reads the admin API with the admin token. The
// header's pages are routes of the URL's fragment (#/, #/keys,
// #/key/KEY, #/dlq/SEQ, #/outcomes, #/effects, #/consumers), so a page
// can be linked to and the browser's back button works; the overview
// renders the tiles, the chart, the stuck keys, the DLQ and the
// collisions, and pages.js the others.
"use strict";

const REFRESH_MS = 2000;

function showLogin(message) {
  $("#app").hidden = true;
  $("#operator").hidden = true;
  $("#nav").hidden = true;
  $("#login-panel").hidden = false;
  $("#login-error").textContent = message || "";
}

// loggedOut forgets a token the API refused and asks for another.
function loggedOut(message) {
  forgetToken();
  rendered = {};
  showLogin(message);
}

function showApp() {
  $("#login-panel").hidden = true;
  $("#app").hidden = false;
  $("#operator").hidden = false;
  $("#nav").hidden = false;
}

// route reads the page and its parameters from the URL's fragment.
function route() {
  const h = location.hash.replace(/^#\/?/, "");
  const q = h.indexOf("?");
  const path = q < 0 ? h : h.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : h.slice(q + 1));
  const parts = path.split("/").filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch (_) { return p; } });
  switch (parts[0]) {
    case "keys": return { page: "keys", params };
    case "key": return { page: "key", key: parts.slice(1).join("/"), params };
    case "dlq": return { page: "deadletter", seq: parts[1], params };
    case "outcomes": return { page: "outcomes", params };
    case "effects": return { page: "effects", params };
    case "consumers": return { page: "consumers", params };
    default: return { page: "overview", params };
  }
}

// go navigates to a page (href as pageHref builds it) with params.
function go(href, params) {
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, val]) => val !== "" && val !== null && val !== undefined)).toString() : "";
  location.hash = href.replace(/^#/, "") + (q ? "?" + q : "");
}

function showPage(name) {
  for (const p of document.querySelectorAll(".page")) p.hidden = p.dataset.page !== name;
  const tab = name === "key" ? "keys" : name === "deadletter" ? "overview" : name;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.page === tab) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// counter is one tile; help is its tooltip, what the number counts.
function counter(id, label, value, help, bad) {
  return el("div", { class: "counter" + (bad ? " bad" : ""), title: help, dataset: { tile: id } },
    el("div", { class: "v" }, value), el("div", { class: "k" }, label));
}

// inboxLabel is the inbox tile's label: it says how old the count is
// once that is 10 s or more (a large inbox is counted seldom).
function inboxLabel(o) {
  const age = (Date.parse(o.now) - Date.parse(o.counts.inbox_counted_at)) / 1000;
  return age >= 10 ? "inbox rows (" + Math.round(age) + " s ago)" : "inbox rows";
}

function renderOverview(o) {
  $("#consumer").textContent = visible("consumer " + o.consumer + " · " + o.handler + " handler");
  const c = o.counts;
  const rejected = o.rejected_at_ingest + o.outcomes.rejected;
  const oldest = timeEl(c.oldest_stuck, "age");
  $("#counters").replaceChildren(
    counter("rate", "applied / s (1 min)", o.applied_per_second.toFixed(2), "Events applied per second, averaged over the last minute."),
    counter("applied", "applied (total)", o.outcomes.applied, "Events applied since this server started."),
    counter("duplicates", "duplicates", o.outcomes.duplicate, "Deliveries of an event already recorded, since this server started: applied nothing."),
    counter("inbox", inboxLabel(o), c.inbox_rows, "Identities (source, id) the inbox remembers, until retention purges them. " +
      "Counted at " + c.inbox_counted_at + ": counting reads every identity, so a large inbox is counted again only once its last count is 20 times as old as that count took."),
    counter("queue", "queue ready / leased", o.queue_ready + " / " + o.queue_leased, "Messages in the gateway's queue: waiting, and being processed."),
    counter("blocked", "blocked keys", c.blocked_keys, "Keys that apply nothing until an operator acts: release, redrive or skip below.", c.blocked_keys > 0),
    counter("held", "held messages", c.held, "Messages waiting for a missing version or a retrying predecessor, until their hold times out.", c.held > 0),
    counter("oldest", "oldest stuck", oldest, "How long the longest-stuck key has been stuck: since its oldest held or blocked message was parked or it blocked, whichever came first (the keys' \"stuck since\", seqbox_oldest_stuck_age_seconds).", c.oldest_stuck !== null),
    counter("dlq", "DLQ (open)", c.dead_letters, "Dead letters not yet redriven or skipped.", c.dead_letters > 0),
    counter("collisions", "collisions", o.outcomes.collision, "Events that reused an identity with a different payload, since this server started: parked, see Collisions.", o.outcomes.collision > 0),
    counter("gaps", "gaps recorded", c.gaps, "Versions given up by a decision (a release, a skip, a hold expiry that advances), with who and why."),
    counter("rejected", "rejected", rejected,
      "Invalid events since this server started: " + o.rejected_at_ingest + " refused with 400 by POST /v1/events (never queued; " +
      "seqbox_gateway_invalid_events_total) plus " + o.outcomes.rejected + " the consumer rejected as invalid envelopes (outcome rejected, kept in the DLQ).",
      rejected > 0),
  );
}

// keyActions are the buttons of the API's actions for a key: release it,
// redrive or skip the dead letter it is blocked behind, or resolve that
// dead letter's uncertain call first.
function keyActions(k) {
  return (k.actions || []).map((a) => {
    if (a.name === "resolve") {
      const b = k.blocked_by;
      return el("button", { class: "act resolve", type: "button", dataset: { action: "resolve", target: b.open_call.idempotency_key },
        onclick: () => openResolve(b.open_call.idempotency_key, b.source + " / " + b.id) }, "resolve");
    }
    return actionButton(a.name, a.name === "release" ? k.partitionkey : k.blocked_by.dlq_seq, a.path);
  });
}

function renderKeys(keys) {
  $("#stuck-keys tbody").replaceChildren(...keys.map((k) => {
    const buttons = keyActions(k);
    return el("tr", { dataset: { key: k.partitionkey, status: k.status } },
      el("td", { class: "object" }, keyEl(k.partitionkey)),
      el("td", { class: "status-" + k.status }, k.status),
      el("td", {}, v(k.expected)),
      el("td", {}, v(k.received)),
      el("td", { class: "since" }, timeEl(k.since)),
      el("td", { class: "reason" }, reasonEl(k.reason), k.hold_until ? el("div", { class: "muted" }, "hold ends ", timeEl(k.hold_until)) : null),
      el("td", {}, el("div", {}, k.next_action), buttons.length ? el("div", { class: "actions" }, ...buttons) : null));
  }));
  $("#stuck-empty").hidden = keys.length > 0;
}

// selected holds the seqs (as strings) of the dead letters ticked for a
// bulk action; it outlives a redraw.
const selected = new Set();

function renderSelection() {
  const n = selected.size;
  $("#bulk-count").textContent = n === 0 ? "none selected" : n + (n === 1 ? " dead letter selected" : " dead letters selected");
  for (const id of ["#bulk-redrive", "#bulk-skip", "#bulk-clear"]) $(id).disabled = n === 0;
  $("#bulk-redrive").textContent = n ? `Redrive ${n} selected` : "Redrive selected";
  $("#bulk-skip").textContent = n ? `Skip ${n} selected` : "Skip selected";
  const boxes = [...document.querySelectorAll("#dlq tbody input.pick")];
  for (const b of boxes) b.checked = selected.has(b.dataset.seq);
  $("#dlq-all").checked = boxes.length > 0 && boxes.every((b) => b.checked);
}

function renderDLQ(dls) {
  const open = new Set(dls.map((d) => String(d.seq)));
  for (const s of [...selected]) if (!open.has(s)) selected.delete(s);
  $("#dlq tbody").replaceChildren(...dls.map((d) => {
    const pick = el("input", { type: "checkbox", class: "pick", "aria-label": "select dead letter " + d.seq, dataset: { seq: String(d.seq) } });
    pick.addEventListener("change", () => { if (pick.checked) selected.add(String(d.seq)); else selected.delete(String(d.seq)); renderSelection(); });
    return el("tr", { dataset: { seq: String(d.seq) } },
      el("td", {}, pick),
      el("td", {}, dlEl(d.seq)),
      el("td", { class: "object" }, keyEl(d.partitionkey)),
      el("td", {}, v(d.objectversion)),
      el("td", { class: "identity" }, (d.source || "?") + " / " + (d.id || "?")),
      el("td", {}, d.attempts, d.redrives ? el("div", { class: "muted" }, d.redrives + " failed redrive" + (d.redrives === 1 ? "" : "s")) : null),
      el("td", { class: "dead-at" }, timeEl(d.dead_at)),
      el("td", { class: "reason" }, el("div", {}, reasonEl(d.reason)), el("div", {}, reasonEl(d.last_error, "muted"))),
      el("td", { class: "actions" }, actionButton("redrive", d.seq, `/v1/admin/dlq/${d.seq}/redrive`),
        actionButton("skip", d.seq, `/v1/admin/dlq/${d.seq}/skip`)));
  }));
  $("#dlq-empty").hidden = dls.length > 0;
  renderSelection();
}

function initBulk() {
  $("#dlq-all").addEventListener("change", () => {
    for (const b of document.querySelectorAll("#dlq tbody input.pick")) {
      if ($("#dlq-all").checked) selected.add(b.dataset.seq); else selected.delete(b.dataset.seq);
    }
    renderSelection();
  });
  // The selection in the order of the table: oldest dead letter first.
  const picked = () => [...document.querySelectorAll("#dlq tbody input.pick")].filter((b) => selected.has(b.dataset.seq)).map((b) => b.dataset.seq);
  $("#bulk-redrive").addEventListener("click", () => openBulk("redrive", picked()));
  $("#bulk-skip").addEventListener("click", () => openBulk("skip", picked()));
  $("#bulk-clear").addEventListener("click", () => { selected.clear(); renderSelection(); });
}

// rendered holds what each part of the page was last drawn from: a part
// is drawn again only when its data changed (times tick in place), so a
// button does not move under the pointer, a tooltip stays open and an
// expanded reason stays expanded.
let rendered = {};

// VOLATILE are the fields that change with the clock alone.
const VOLATILE = ["now", "uptime_seconds", "oldest_stuck_age_seconds", "age_seconds", "heartbeat_age_seconds", "series"];

// drawing is the fragment of the page the refresh under way reads: once
// the operator moved on to another, what it read is not drawn.
let drawing = "";

function renderChanged(name, data, render) {
  if (location.hash !== drawing) return;
  let key;
  try {
    key = JSON.stringify(data, (k, val) => VOLATILE.includes(k) ? undefined : val);
  } catch (_) {
    key = jsonText(data); // nested too deep for the browser's JSON.stringify
  }
  if (rendered[name] === key) return;
  rendered[name] = key;
  try {
    render(data);
  } catch (e) {
    // Half drawn is worse than not drawn: the next refresh draws it again.
    rendered[name] = undefined;
    if (name === "deadletter") clearDeadLetter();
    throw e;
  }
}

// PAGE is how many more stuck keys or dead letters "Show more" draws;
// overviewShown holds how many the overview draws of each (the oldest first), so
// that a thousand dead letters do not make a page of a thousand rows.
const PAGE = 100;
const overviewShown = { keys: PAGE, dlq: PAGE };

// renderMore says how many of total rows the table under sel draws (the
// first in order: oldest unless said), and offers more when some are left
// out.
function renderMore(sel, drawn, total, what, order = "oldest") {
  const p = $(sel);
  p.hidden = drawn >= total;
  p.querySelector("span").textContent = `the ${drawn} ${order} of ${total} ${what}`;
}

// overviewPage loads and draws the overview's parts.
async function overviewPage(o) {
  const [keys, dlq, cols] = await Promise.all([api("/v1/admin/keys?limit=" + overviewShown.keys), api("/v1/admin/dlq?limit=" + overviewShown.dlq),
    api("/v1/admin/collisions")]);
  renderChanged("overview", o, renderOverview);
  renderChanged("chart", { points: o.series, bucket: o.bucket_seconds, started: o.started_at, scale: chartScale() }, () => renderChart(o));
  renderChanged("keys", keys.keys, renderKeys);
  renderMore("#stuck-more", keys.keys.length, keys.total, "stuck keys");
  renderChanged("dlq", dlq.dead_letters, renderDLQ);
  // Without a next page this one is all; with one, the overview's count
  // of open dead letters (read a moment before) says how many in all.
  const n = dlq.dead_letters.length;
  renderMore("#dlq-more", n, dlq.next_after == null ? n : Math.max(o.counts.dead_letters, n + 1), "open dead letters");
  renderChanged("collisions", cols.collisions, renderCollisions);
}

let refreshing = false;
let again = false;

// refresh reads the overview (the header, the server's clock) and the
// current page's data, and draws what changed; reset draws the page anew
// (after an action, or on arriving at it).
async function refresh(reset) {
  if (!token()) return;
  if (reset) rendered = {};
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    drawing = location.hash;
    const r = route();
    const o = await api("/v1/admin/overview");
    showApp();
    syncClock(o.now);
    $("#consumer").textContent = visible("consumer " + o.consumer + " · " + o.handler + " handler");
    if (location.hash === drawing) showPage(r.page);
    if (r.page === "overview") await overviewPage(o);
    else await PAGES[r.page](r);
    tickTimes();
    document.body.dataset.loaded = "true";
    if (location.hash === drawing) document.body.dataset.page = r.page;
    if ($("#status").dataset.kind === "refresh") setStatus("", "");
  } catch (e) {
    if (e instanceof Unauthorized) loggedOut(e.message);
    else setStatus("refresh", "refresh failed: " + e.message);
  } finally {
    refreshing = false;
    if (again) { again = false; refresh(); }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  initActions();
  initBulk();
  initPages();
  for (const part of ["keys", "dlq"]) {
    const sel = part === "keys" ? "#stuck-more" : "#dlq-more";
    $(sel + " button").addEventListener("click", () => { overviewShown[part] += PAGE; refresh(); });
  }
  $("#key-parked-more button").addEventListener("click", () => { keyParked.shown += PAGE; refresh(); });
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken($("#token").value);
    $("#token").value = "";
    refresh(true);
  });
  $("#logout").addEventListener("click", () => loggedOut(""));
  $("#key-search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    go(pageHref("keys"), { q: $("#key-search-q").value.trim() });
  });
  for (const b of document.querySelectorAll(".scale button")) {
    b.addEventListener("click", () => { sessionStorage.setItem(SCALE_KEY, b.dataset.scale); refresh(); });
  }
  window.addEventListener("hashchange", () => {
    document.body.dataset.page = "";
    // What an action said belongs to the page it was taken on.
    if ($("#status").dataset.kind !== "busy") setStatus("", "");
    refresh(true);
  });
  if (token()) refresh(true); else showLogin("");
  setInterval(refresh, REFRESH_MS);
});
