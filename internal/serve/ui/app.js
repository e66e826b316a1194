// The seqbox dashboard: reads the admin API with the admin token and
// renders it. Every value from the server is inserted as text, never as
// markup.
"use strict";

const TOKEN_KEY = "seqbox.adminToken";
const BY_KEY = "seqbox.by";
const REFRESH_MS = 2000;
const OUTCOME_COLORS = {
  applied: "#067647", duplicate: "#98a2b3", collision: "#b42318", semantic_duplicate: "#7a5af8",
  stale: "#667085", version_conflict: "#d92d20", held: "#dc6803", expired: "#475467",
  blocked: "#f04438", retry: "#fdb022", dead_lettered: "#912018", rejected: "#3e4784",
};

const $ = (sel) => document.querySelector(sel);

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else if (k === "color") e.style.background = v; // CSSOM: allowed by the page's CSP
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

class Unauthorized extends Error {}

async function api(path, options) {
  const opts = Object.assign({ headers: {} }, options || {});
  opts.headers = Object.assign({ Authorization: "Bearer " + token() }, opts.headers);
  const resp = await fetch(path, opts);
  let body = null;
  try { body = await resp.json(); } catch (_) { body = null; }
  if (resp.status === 401) throw new Unauthorized((body && body.detail) || "unauthorized");
  if (!resp.ok) throw new Error((body && (body.detail || body.title)) || resp.status + " " + resp.statusText);
  return body;
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return s + "s";
  if (s < 5400) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

function v(x) { return x === null || x === undefined ? "-" : String(x); }

function showLogin(message) {
  $("#app").hidden = true;
  $("#operator").hidden = true;
  $("#login-panel").hidden = false;
  $("#login-error").textContent = message || "";
}

function showApp() {
  $("#login-panel").hidden = true;
  $("#app").hidden = false;
  $("#operator").hidden = false;
}

function counter(label, value, bad) {
  return el("div", { class: "counter" + (bad ? " bad" : "") }, el("div", { class: "v" }, value), el("div", { class: "k" }, label));
}

function renderOverview(o) {
  $("#consumer").textContent = "consumer " + o.consumer + " · " + o.handler + " handler";
  const c = o.counts;
  const box = $("#counters");
  box.replaceChildren(
    counter("applied / s (1 min)", o.applied_per_second.toFixed(2)),
    counter("applied (total)", o.outcomes.applied),
    counter("duplicates", o.outcomes.duplicate),
    counter("inbox rows", c.inbox_rows),
    counter("queue ready / leased", o.queue_ready + " / " + o.queue_leased),
    counter("blocked keys", c.blocked_keys, c.blocked_keys > 0),
    counter("held messages", c.held, c.held > 0),
    counter("oldest stuck", c.oldest_stuck ? ago(c.oldest_stuck_age_seconds) : "-", c.oldest_stuck !== null),
    counter("DLQ (open)", c.dead_letters, c.dead_letters > 0),
    counter("collisions", o.outcomes.collision, o.outcomes.collision > 0),
    counter("gaps recorded", c.gaps),
    counter("rejected", o.outcomes.rejected, o.outcomes.rejected > 0),
  );
  renderChart(o.series, o.bucket_seconds);
}

function renderChart(series, bucketSeconds) {
  const W = 1000, H = 180, PAD = 24;
  const outcomes = Object.keys(OUTCOME_COLORS).filter((k) => series.some((p) => p.counts[k]));
  let max = 1;
  for (const p of series) for (const k of outcomes) max = Math.max(max, p.counts[k] || 0);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "outcomes per " + bucketSeconds + " seconds");
  const axis = document.createElementNS(ns, "line");
  Object.entries({ x1: PAD, y1: H - PAD, x2: W, y2: H - PAD, stroke: "#d9dee4" }).forEach(([k, val]) => axis.setAttribute(k, val));
  svg.append(axis);
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", 2); label.setAttribute("y", 12); label.setAttribute("font-size", 11); label.setAttribute("fill", "#6b7683");
  label.textContent = String(max);
  svg.append(label);
  const step = (W - PAD) / Math.max(1, series.length - 1);
  for (const k of outcomes) {
    const pts = series.map((p, i) => `${(PAD + i * step).toFixed(1)},${(H - PAD - ((p.counts[k] || 0) / max) * (H - 2 * PAD)).toFixed(1)}`);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", OUTCOME_COLORS[k]);
    line.setAttribute("stroke-width", "2");
    line.dataset.outcome = k;
    svg.append(line);
  }
  $("#chart").replaceChildren(svg);
  $("#chart-note").textContent = "(per " + bucketSeconds + " s, last " + Math.round((series.length * bucketSeconds) / 60) + " min)";
  $("#legend").replaceChildren(...outcomes.map((k) => el("span", {}, el("i", { color: OUTCOME_COLORS[k] }), k)));
}

function actionButtons(seq) {
  return [
    el("button", { class: "redrive", type: "button", dataset: { seq: String(seq) }, onclick: () => act("redrive", seq) }, "redrive"),
    el("button", { class: "skip", type: "button", dataset: { seq: String(seq) }, onclick: () => act("skip", seq) }, "skip"),
  ];
}

function renderKeys(keys) {
  const body = $("#stuck-keys tbody");
  body.replaceChildren(...keys.map((k) => {
    const next = [el("div", {}, k.next_action)];
    if (k.blocked_by && k.blocked_by.dlq_seq !== null) next.push(el("div", {}, ...actionButtons(k.blocked_by.dlq_seq)));
    return el("tr", { dataset: { key: k.partitionkey, status: k.status } },
      el("td", {}, k.partitionkey),
      el("td", { class: "status-" + k.status }, k.status),
      el("td", {}, v(k.expected)),
      el("td", {}, v(k.received)),
      el("td", {}, v(k.since)),
      el("td", {}, ago(k.age_seconds)),
      el("td", { class: "reason" }, k.reason || "-"),
      el("td", {}, ...next));
  }));
  $("#stuck-empty").hidden = keys.length > 0;
}

function renderDLQ(dls) {
  const body = $("#dlq tbody");
  body.replaceChildren(...dls.map((d) => el("tr", { dataset: { seq: String(d.seq) } },
    el("td", {}, d.seq),
    el("td", {}, d.partitionkey || "-"),
    el("td", {}, v(d.objectversion)),
    el("td", {}, (d.source || "?") + " / " + (d.id || "?")),
    el("td", {}, d.attempts),
    el("td", {}, v(d.dead_at)),
    el("td", { class: "reason" }, el("div", {}, d.reason), el("div", { class: "muted" }, d.last_error)),
    el("td", {}, ...actionButtons(d.seq)))));
  $("#dlq-empty").hidden = dls.length > 0;
}

function pretty(p) {
  if (!p) return "(not kept: purged by retention)";
  if (p.text === undefined) return "(binary, base64) " + p.base64;
  try { return JSON.stringify(JSON.parse(p.text), null, 2); } catch (_) { return p.text; }
}

function renderCollisions(cs) {
  $("#collisions").replaceChildren(...cs.map((c) => el("div", { class: "collision", dataset: { source: c.source, id: c.id } },
    el("div", {}, el("strong", {}, c.source + " / " + c.id), " ", el("span", { class: "muted" }, (c.partitionkey || "no key") + " · " + v(c.at))),
    el("div", { class: "muted" }, c.reason),
    el("div", { class: "pair" },
      el("div", {}, el("div", {}, "first (" + (c.first_outcome || "?") + ")"), el("pre", { class: "first" }, pretty(c.first))),
      el("div", {}, el("div", {}, "second (parked)"), el("pre", { class: "second" }, pretty(c.second)))))));
  $("#collisions-empty").hidden = cs.length > 0;
}

let refreshing = false;
async function refresh() {
  if (refreshing || !token()) return;
  refreshing = true;
  try {
    const [o, keys, dlq, cols] = await Promise.all([
      api("/v1/admin/overview"), api("/v1/admin/keys"), api("/v1/admin/dlq"), api("/v1/admin/collisions")]);
    showApp();
    renderOverview(o);
    renderKeys(keys.keys);
    renderDLQ(dlq.dead_letters);
    renderCollisions(cols.collisions);
    document.body.dataset.loaded = "true";
  } catch (e) {
    if (e instanceof Unauthorized) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(e.message);
    } else {
      $("#status").textContent = "refresh failed: " + e.message;
    }
  } finally {
    refreshing = false;
  }
}

async function act(action, seq) {
  const by = $("#by").value.trim();
  const reason = $("#reason").value.trim();
  sessionStorage.setItem(BY_KEY, by);
  $("#status").textContent = action + " of dead letter " + seq + "…";
  try {
    const res = await api(`/v1/admin/dlq/${encodeURIComponent(seq)}/${action}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ by, reason }),
    });
    const outcomes = res.decisions.map((d) => d.outcome).join(", ") || "nothing to apply";
    $("#status").textContent = `request ${res.request}: ${action} ${res.state} (${outcomes})`;
  } catch (e) {
    $("#status").textContent = action + " failed: " + e.message;
  }
  await refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#by").value = sessionStorage.getItem(BY_KEY) || "dashboard";
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value);
    $("#token").value = "";
    refresh();
  });
  $("#logout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showLogin(""); });
  if (token()) refresh(); else showLogin("");
  setInterval(refresh, REFRESH_MS);
});
