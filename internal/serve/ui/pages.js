// The dashboard's pages beside the overview: a key, a dead letter, the
// key search, the recent outcomes, the effects ledger and the consumers.
// Each reads the admin API and draws what changed (renderChanged).
"use strict";

// AUDITED are the outcomes the audit records (a duplicate is counted on
// its inbox row; an applied event is not audited).
const AUDITED = ["stale", "expired", "semantic_duplicate", "collision", "rejected", "version_conflict", "held", "blocked",
  "retry", "dead_lettered"];

const EFFECT_STATES = ["uncertain", "pending", "failed", "succeeded"];

// fact is one term and its description in a facts list.
function fact(term, ...desc) {
  return [el("dt", {}, term), el("dd", {}, ...desc)];
}

// missing draws a page's "not found" (or other failure) in place of its
// content, and says it on the status line.
function notFound(what, e) {
  setStatus("bad", what + ": " + e.message);
}

// parkedRow is one parked message; withEnvelope adds its bytes, collapsed.
function parkedRow(p, withEnvelope) {
  const cells = [
    el("td", {}, p.seq),
    el("td", {}, v(p.objectversion)),
    el("td", { class: "identity" }, p.source + " / " + p.id),
    el("td", { class: "status-" + p.reason }, p.reason),
    el("td", {}, timeEl(p.parked_at)),
  ];
  if (withEnvelope) {
    cells.push(el("td", {}, timeEl(p.hold_until)), el("td", { class: "reason" }, reasonEl(p.detail)),
      el("td", {}, envelopeDetails(p.envelope)));
  }
  return el("tr", { dataset: { seq: String(p.seq), version: v(p.objectversion) } }, ...cells);
}

// envelopeDetails is an envelope's bytes, collapsed: pretty JSON when it
// parses.
function envelopeDetails(p) {
  if (!p) return "-";
  let body;
  if (p.text === undefined) body = el("pre", {}, "(binary, base64) " + p.base64);
  else {
    try { body = jsonView(JSON.parse(p.text)); } catch (_) { body = el("pre", {}, p.text); }
  }
  return el("details", { class: "envelope" }, el("summary", {}, p.bytes + " bytes"), body);
}

// auditRow is one audit row; withKey adds the object's column.
function auditRow(a, withKey) {
  const cells = [el("td", { class: "at" }, timeEl(a.at)), el("td", {}, outcomeEl(a.outcome))];
  if (withKey) cells.push(el("td", { class: "object" }, keyEl(a.partitionkey)));
  cells.push(el("td", { class: "identity" }, a.source + " / " + a.id),
    el("td", { class: "received" }, v(a.received_version)),
    el("td", { class: "met", title: "the key's version when this event arrived" }, v(a.current_version)),
    el("td", { class: "reason" }, reasonEl(a.reason)),
    el("td", { class: "next" }, reasonEl(a.next_action, "muted")));
  return el("tr", { dataset: { seq: String(a.seq), outcome: a.outcome, id: a.id } }, ...cells);
}

// waitsFor says in words what a key waits for.
function waitsFor(k) {
  if (k.blocked) {
    if (k.blocked_by && k.blocked_by.dlq_seq) return ["an operator: dead letter ", dlEl(k.blocked_by.dlq_seq), " blocks it (redrive or skip it)"];
    return ["an operator: release it past the missing version(s), or deliver version " + v(k.expected)];
  }
  if (k.expected === null || k.expected === undefined) {
    return [k.version === null ? "its first event, which becomes its baseline" : "nothing: no version follows " + k.version];
  }
  const held = k.held ? `; ${k.held} message${k.held === 1 ? "" : "s"} held from version ${v(k.lowest_parked)}` : "";
  return ["version " + k.expected + held];
}

function renderKey(d) {
  const k = d;
  $("#key-crumb").textContent = visible(k.partitionkey);
  $("#key-name").textContent = visible(k.partitionkey);
  $("#key-status").replaceChildren(el("span", { class: "badge status-" + k.status }, k.status));
  const facts = [
    ...fact("version", v(k.version)),
    ...fact("waits for", ...waitsFor(k)),
    ...fact("expected next", v(k.expected)),
    ...fact("first version", el("span", { class: "first-version", dataset: { rule: (k.first_version || {}).rule || "" } }, (k.first_version || {}).says || "")),
    ...fact("lowest parked", v(k.lowest_parked)),
    ...fact("held", String(k.held || 0)),
    ...fact("blocked", k.blocked ? "yes, " + k.blocked_messages + " message" + (k.blocked_messages === 1 ? "" : "s") + " parked behind the block" : "no"),
  ];
  if (k.since) facts.push(...fact("stuck since", timeEl(k.since)));
  if (k.reason) facts.push(...fact("reason", reasonEl(k.reason)));
  if (k.hold_until) facts.push(...fact("hold ends", timeEl(k.hold_until)));
  if (k.turn) {
    facts.push(...fact("turn held by", k.turn.source + " / " + k.turn.id, " (last seen ", timeEl(k.turn.last_seen), ")",
      k.turn.last_error ? el("div", { class: "muted" }, reasonEl(k.turn.last_error)) : null));
  }
  facts.push(...fact("next action", k.next_action || "none"));
  if (k.action) facts.push(...fact("from a shell", el("code", {}, k.action)));
  $("#key-facts").replaceChildren(...facts);
  $("#key-actions").replaceChildren(...keyActions(k));
  $("#key-parked tbody").replaceChildren(...d.parked.map((p) => parkedRow(p, true)));
  $("#key-parked-empty").hidden = d.parked.length > 0;
  renderMore("#key-parked-more", d.parked.length, d.parked_total, "parked messages", "lowest");
  $("#key-gaps tbody").replaceChildren(...d.gaps.map((g) => el("tr", {},
    el("td", {}, g.from_version === g.to_version ? String(g.from_version) : g.from_version + "–" + g.to_version),
    el("td", {}, g.decided_by), el("td", { class: "reason" }, reasonEl(g.reason)), el("td", {}, timeEl(g.at)))));
  $("#key-gaps-empty").hidden = d.gaps.length > 0;
  $("#key-audit tbody").replaceChildren(...d.audit.slice().reverse().map((a) => auditRow(a, false)));
  $("#key-audit-empty").hidden = d.audit.length > 0;
  $("#key-outcomes-link").href = pageHref("outcomes") + "?object=" + encodeURIComponent(k.partitionkey);
}

// keyParked is how many parked messages the key page draws, the lowest
// versions first: a key blocked for a weekend may hold a hundred
// thousand. It starts at a page for each key.
let keyParked = { key: null, shown: 100 };

async function keyPage(r) {
  if (keyParked.key !== r.key) keyParked = { key: r.key, shown: PAGE };
  let d;
  try {
    d = await api("/v1/admin/keys/" + seg(r.key) + "?parked_limit=" + keyParked.shown);
  } catch (e) {
    if (e instanceof Unauthorized) throw e;
    if (location.hash !== drawing) return;
    rendered.key = null;
    $("#key-name").textContent = visible(r.key);
    $("#key-crumb").textContent = visible(r.key);
    $("#key-status").replaceChildren(el("span", { class: "badge" }, "unknown"));
    $("#key-facts").replaceChildren(...fact("not found", "no event of this key was recorded (or retention purged it): " + e.message));
    for (const id of ["#key-actions", "#key-parked tbody", "#key-gaps tbody", "#key-audit tbody"]) $(id).replaceChildren();
    $("#key-parked-more").hidden = true;
    return;
  }
  renderChanged("key", d, renderKey);
}

// envelopeParts splits a stored envelope into its attributes and data.
function envelopeParts(p) {
  if (!p || p.text === undefined) return null;
  let doc;
  try { doc = JSON.parse(p.text); } catch (_) { return null; }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return null;
  const attrs = Object.entries(doc).filter(([k]) => k !== "data" && k !== "data_base64");
  return { attrs, hasData: "data" in doc, data: doc.data, base64: doc.data_base64 };
}

// clearDeadLetter empties the dead letter's page: nothing of one dead
// letter stays under another's number (a page whose drawing failed, a
// number with no dead letter), and no action is offered on it.
function clearDeadLetter() {
  for (const id of ["#dl-crumb", "#dl-seq", "#dl-bytes", "#dl-raw-text"]) $(id).textContent = "";
  $("#dl-parked-more").hidden = true;
  for (const id of ["#dl-state", "#dl-facts", "#dl-actions", "#dl-errors", "#dl-history", "#dl-data", "#dl-attributes tbody", "#dl-parked tbody"]) {
    $(id).replaceChildren();
  }
}

function renderDeadLetter({ d, key }) {
  clearDeadLetter();
  $("#dl-crumb").textContent = d.seq;
  $("#dl-seq").textContent = d.seq;
  $("#dl-state").replaceChildren(el("span", { class: "badge state-" + d.state }, d.state));
  const facts = [
    ...fact("identity", d.source + " / " + d.id),
    ...fact("object", keyEl(d.partitionkey)),
    ...fact("version", v(d.objectversion)),
    ...fact("reason", reasonEl(d.reason)),
    ...fact("dead", timeEl(d.dead_at)),
    ...fact("payload hash", el("code", {}, d.payload_hash || "-")),
  ];
  if (d.state !== "open") facts.push(...fact("resolved", timeEl(d.resolved_at), " ", reasonEl(d.resolution)));
  $("#dl-facts").replaceChildren(...facts);
  $("#dl-actions").replaceChildren(...(d.state === "open" ? [actionButton("redrive", d.seq, `/v1/admin/dlq/${d.seq}/redrive`),
    actionButton("skip", d.seq, `/v1/admin/dlq/${d.seq}/skip`)] : []));
  $("#dl-errors").replaceChildren(
    ...fact("attempts", String(d.attempts)),
    ...fact("failed redrives", String(d.redrives || 0)),
    ...fact("first error", reasonEl(d.first_error)),
    ...fact("last error", reasonEl(d.last_error)));
  const history = d.history || [];
  $("#dl-history").replaceChildren(...history.map((h) => el("li", {}, reasonEl(h))));
  $("#dl-history-empty").hidden = history.length > 0;

  const env = d.envelope;
  $("#dl-bytes").textContent = env ? "(" + env.bytes + " bytes, as the consumer received them)" : "";
  const parts = envelopeParts(env);
  if (parts) {
    $("#dl-attributes tbody").replaceChildren(...parts.attrs.map(([k, val]) => el("tr", { dataset: { attr: k } },
      el("th", {}, k), el("td", {}, typeof val === "string" ? val : jsonText(val)))));
    $("#dl-data").replaceChildren(parts.hasData ? jsonView(parts.data)
      : parts.base64 !== undefined ? el("pre", {}, "(data_base64) " + parts.base64) : el("p", { class: "muted" }, "no data"));
  } else {
    $("#dl-attributes tbody").replaceChildren();
    $("#dl-data").replaceChildren(el("p", { class: "muted" }, "The bytes are not a JSON envelope: they are shown as stored below."));
  }
  $("#dl-raw-text").textContent = !env ? "" : env.text !== undefined ? env.text : "(base64) " + env.base64;
  $("#dl-raw").open = !parts;

  const parked = key ? key.parked.filter((p) => !(p.source === d.source && p.id === d.id)) : [];
  $("#dl-parked tbody").replaceChildren(...parked.map((p) => parkedRow(p, false)));
  $("#dl-parked-empty").hidden = parked.length > 0;
  // The key's page holds the rest: its first page is what was read here.
  const more = key && key.parked_next != null;
  $("#dl-parked-more").hidden = !more;
  $("#dl-parked-more").replaceChildren(...(more ? [`the ${key.parked.length} lowest of ${key.parked_total} parked on its key; all of them on `, keyEl(d.partitionkey)] : []));
}

async function deadLetterPage(r) {
  let d;
  try {
    d = await api("/v1/admin/dlq/" + encodeURIComponent(r.seq));
  } catch (e) {
    if (e instanceof Unauthorized) throw e;
    if (location.hash !== drawing) return;
    rendered.deadletter = null;
    clearDeadLetter();
    $("#dl-crumb").textContent = visible(String(r.seq));
    notFound("dead letter " + r.seq, e);
    return;
  }
  let key = null;
  if (d.partitionkey) {
    try { key = await api("/v1/admin/keys/" + seg(d.partitionkey)); } catch (e) { if (e instanceof Unauthorized) throw e; }
  }
  renderChanged("deadletter", { d, key }, renderDeadLetter);
}

function renderKeySearch({ res, q }) {
  $("#keys-note").textContent = res.total > res.keys.length ? `the first ${res.keys.length} of ${res.total}` : res.total + (res.total === 1 ? " key" : " keys");
  $("#keys-table tbody").replaceChildren(...res.keys.map((k) => el("tr", { dataset: { key: k.partitionkey, status: k.status } },
    el("td", { class: "object" }, keyEl(k.partitionkey)),
    el("td", { class: "status-" + k.status }, k.status),
    el("td", {}, v(k.version)),
    el("td", {}, v(k.expected)),
    el("td", {}, String(k.held || 0)),
    el("td", {}, k.blocked_by && k.blocked_by.dlq_seq ? dlEl(k.blocked_by.dlq_seq) : "-"),
    el("td", {}, timeEl(k.since)),
    el("td", { class: "reason" }, reasonEl(k.reason)))));
  $("#keys-empty").hidden = res.keys.length > 0;
  $("#keys-empty").textContent = q ? visible(`No key holds "${q}".`) : "No key yet.";
}

async function keysPage(r) {
  const q = r.params.get("q") || "";
  if (document.activeElement !== $("#keys-q")) $("#keys-q").value = q;
  const res = await api("/v1/admin/keys?" + new URLSearchParams({ all: "true", search: q, limit: "200" }));
  renderChanged("keysearch", { res, q }, renderKeySearch);
}

function renderOutcomes({ page, params }) {
  const rows = page.audit.slice().reverse();
  $("#outcomes-table tbody").replaceChildren(...rows.map((a) => auditRow(a, true)));
  $("#outcomes-empty").hidden = rows.length > 0;
  const what = [];
  if (params.outcome) what.push("outcome " + params.outcome.split(",").join(" or "));
  if (params.object) what.push("key " + params.object);
  if (params.q) what.push(`matching "${params.q}"`);
  const scan = page.scan_complete ? "" : ` (among the newest ${page.scan_limit} recorded)`;
  $("#outcomes-note").replaceChildren(...[(rows.length ? rows.length + " shown" : "none") + (what.length ? ", " + what.join(", ") : "") + scan,
    params.before ? el("span", {}, " · older than row " + params.before) : null,
    params.object ? el("span", {}, " · ", el("a", { href: "#/outcomes", id: "outcomes-all-keys" }, "every key")) : null].filter((x) => x !== null));
  $("#outcomes-older").disabled = page.next_before === null;
  $("#outcomes-older").dataset.before = page.next_before === null ? "" : String(page.next_before);
  $("#outcomes-newest").disabled = !params.before;
}

// outcomeParams are the outcomes page's query, as the route has it.
function outcomeParams(r) {
  const p = {};
  for (const k of ["outcome", "q", "limit", "before", "object"]) if (r.params.get(k)) p[k] = r.params.get(k);
  return p;
}

async function outcomesPage(r) {
  const params = outcomeParams(r);
  const chosen = new Set((params.outcome || "").split(",").filter(Boolean));
  for (const b of document.querySelectorAll("#outcome-filter input")) b.checked = chosen.has(b.value);
  if (document.activeElement !== $("#outcomes-q")) $("#outcomes-q").value = params.q || "";
  $("#outcomes-limit").value = params.limit || "50";
  const page = await api("/v1/admin/audit?" + new URLSearchParams(Object.assign({ limit: "50" }, params)));
  renderChanged("outcomes", { page, params }, renderOutcomes);
}

function renderEffects({ res, state }) {
  for (const b of document.querySelectorAll("#effects-states button")) b.setAttribute("aria-pressed", String(b.dataset.state === state));
  $("#effects-table tbody").replaceChildren(...res.effects.map((e) => {
    const label = e.source + " / " + e.id;
    return el("tr", { dataset: { key: e.idempotency_key, state: e.state, id: e.id } },
      el("td", { class: "identity" }, label),
      el("td", {}, e.action),
      el("td", { class: "state-" + e.state }, e.state),
      el("td", {}, e.calls),
      el("td", { class: "reason" }, reasonEl(e.last_error)),
      el("td", { class: "reason" }, reasonEl(e.ref)),
      el("td", {}, timeEl(e.updated_at)),
      el("td", { class: "idem", title: e.idempotency_key }, e.idempotency_key.slice(0, 12) + "…"),
      el("td", {}, e.state === "uncertain" ? el("button", { class: "act resolve", type: "button",
        onclick: () => openResolve(e.idempotency_key, label) }, "resolve") : null));
  }));
  $("#effects-empty").hidden = res.effects.length > 0;
  $("#effects-more").hidden = !res.more;
}

async function effectsPage(r) {
  const state = r.params.get("state") || "";
  const res = await api("/v1/admin/effects?" + new URLSearchParams(state ? { state, limit: "200" } : { limit: "200" }));
  renderChanged("effects", { res, state }, renderEffects);
}

function renderConsumers(res) {
  $("#consumers-table tbody").replaceChildren(...res.consumers.map((c) => {
    const policies = Object.entries(c.policies || {});
    const circuit = c.circuit ? [el("span", { class: "circuit-" + c.circuit.state }, c.circuit.state.replace("_", "-")),
      c.circuit.until ? el("div", { class: "muted" }, "next trial ", timeEl(c.circuit.until)) : null,
      c.circuit.state === "closed" && c.circuit.failures_in_a_row ? el("div", { class: "muted" }, c.circuit.failures_in_a_row + " failures in a row") : null] : ["-"];
    return el("tr", { dataset: { name: c.name, live: String(c.live) } },
      el("td", { class: "key" }, c.name, c.served_here ? el("span", { class: "badge here" }, "this gateway") : null),
      el("td", { class: c.live ? "live" : "not-live" }, c.live ? "live" : "not live"),
      el("td", {}, c.handler_kind),
      el("td", { class: "process" }, c.process || "-"),
      el("td", {}, timeEl(c.started_at)),
      el("td", { class: "heartbeat" }, c.heartbeat_at ? timeEl(c.heartbeat_at) : el("span", { class: "muted" }, "never (it only delivered)")),
      el("td", { class: "in-flight" }, c.in_flight_agent_calls === null ? "-" : c.in_flight_agent_calls + " of " + c.agent_concurrency),
      el("td", { class: "circuit" }, ...circuit),
      el("td", {}, policies.length ? el("details", { class: "policies" }, el("summary", {}, policies.length + " policies"),
        el("table", { class: "attributes" }, el("tbody", {}, ...policies.map(([k, val]) =>
          el("tr", {}, el("th", {}, k), el("td", {}, typeof val === "string" ? val : jsonText(val))))))) : "-"));
  }));
  $("#consumers-empty").hidden = res.consumers.length > 0;
}

async function consumersPage() {
  renderChanged("consumers", await api("/v1/admin/consumers"), renderConsumers);
}

const PAGES = { key: keyPage, deadletter: deadLetterPage, keys: keysPage, outcomes: outcomesPage, effects: effectsPage, consumers: consumersPage };

function initPages() {
  $("#keys-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    go(pageHref("keys"), { q: $("#keys-q").value.trim() });
  });
  $("#outcome-filter").append(...AUDITED.map((o) => el("label", { class: "chip" },
    el("input", { type: "checkbox", value: o, dataset: { outcome: o } }), " ", outcomeEl(o))));
  const outcomeQuery = () => {
    const p = outcomeParams(route());
    const chosen = [...document.querySelectorAll("#outcome-filter input")].filter((b) => b.checked).map((b) => b.value);
    return { outcome: chosen.join(","), q: $("#outcomes-q").value.trim(), limit: $("#outcomes-limit").value, object: p.object };
  };
  $("#outcomes-form").addEventListener("submit", (ev) => { ev.preventDefault(); go(pageHref("outcomes"), outcomeQuery()); });
  // A ticked or unticked outcome applies at once.
  $("#outcome-filter").addEventListener("change", () => go(pageHref("outcomes"), outcomeQuery()));
  $("#outcomes-limit").addEventListener("change", () => go(pageHref("outcomes"), outcomeQuery()));
  $("#outcomes-reset").addEventListener("click", () => go(pageHref("outcomes")));
  $("#outcomes-older").addEventListener("click", () => go(pageHref("outcomes"), Object.assign(outcomeParams(route()), { before: $("#outcomes-older").dataset.before })));
  $("#outcomes-newest").addEventListener("click", () => go(pageHref("outcomes"), Object.assign(outcomeParams(route()), { before: "" })));
  $("#effects-states").append(...["", ...EFFECT_STATES].map((s) => el("button", { type: "button", dataset: { state: s },
    onclick: () => go(pageHref("effects"), { state: s }) }, s || "all")));
}
