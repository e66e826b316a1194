// The seqbox dashboard: reads the admin API with the admin token and
// renders the overview, the stuck keys, the DLQ and the collisions.
"use strict";

const REFRESH_MS = 2000;

function showLogin(message) {
  $("#app").hidden = true;
  $("#operator").hidden = true;
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
}

// counter is one tile; help is its tooltip, what the number counts.
function counter(id, label, value, help, bad) {
  return el("div", { class: "counter" + (bad ? " bad" : ""), title: help, dataset: { tile: id } },
    el("div", { class: "v" }, value), el("div", { class: "k" }, label));
}

function renderOverview(o) {
  $("#consumer").textContent = "consumer " + o.consumer + " · " + o.handler + " handler";
  const c = o.counts;
  const rejected = o.rejected_at_ingest + o.outcomes.rejected;
  const oldest = timeEl(c.oldest_stuck, "age");
  $("#counters").replaceChildren(
    counter("rate", "applied / s (1 min)", o.applied_per_second.toFixed(2), "Events applied per second, averaged over the last minute."),
    counter("applied", "applied (total)", o.outcomes.applied, "Events applied since this server started."),
    counter("duplicates", "duplicates", o.outcomes.duplicate, "Deliveries of an event already recorded, since this server started: applied nothing."),
    counter("inbox", "inbox rows", c.inbox_rows, "Identities (source, id) the inbox remembers, until retention purges them."),
    counter("queue", "queue ready / leased", o.queue_ready + " / " + o.queue_leased, "Messages in the gateway's queue: waiting, and being processed."),
    counter("blocked", "blocked keys", c.blocked_keys, "Keys that apply nothing until an operator acts: release, redrive or skip below.", c.blocked_keys > 0),
    counter("held", "held messages", c.held, "Messages waiting for a missing version or a retrying predecessor, until their hold times out.", c.held > 0),
    counter("oldest", "oldest stuck", oldest, "How long the longest-stuck key has been stuck: since its oldest held message was parked or it blocked, whichever came first (the keys' \"stuck since\", seqbox_oldest_stuck_age_seconds).", c.oldest_stuck !== null),
    counter("dlq", "DLQ (open)", c.dead_letters, "Dead letters not yet redriven or skipped.", c.dead_letters > 0),
    counter("collisions", "collisions", o.outcomes.collision, "Events that reused an identity with a different payload, since this server started: parked, see Collisions.", o.outcomes.collision > 0),
    counter("gaps", "gaps recorded", c.gaps, "Versions given up by a decision (a release, a skip, a hold expiry that advances), with who and why."),
    counter("rejected", "rejected", rejected,
      "Invalid events since this server started: " + o.rejected_at_ingest + " refused with 400 by POST /v1/events (never queued; " +
      "seqbox_gateway_invalid_events_total) plus " + o.outcomes.rejected + " the consumer rejected as invalid envelopes (outcome rejected, kept in the DLQ).",
      rejected > 0),
  );
}

function renderKeys(keys) {
  $("#stuck-keys tbody").replaceChildren(...keys.map((k) => {
    // The API's actions for the key: release it, or redrive or skip the
    // dead letter it is blocked behind.
    const target = (a) => a.name === "release" ? k.partitionkey : k.blocked_by.dlq_seq;
    const buttons = (k.actions || []).map((a) => actionButton(a.name, target(a), a.path));
    return el("tr", { dataset: { key: k.partitionkey, status: k.status } },
      el("td", {}, k.partitionkey),
      el("td", { class: "status-" + k.status }, k.status),
      el("td", {}, v(k.expected)),
      el("td", {}, v(k.received)),
      el("td", { class: "since" }, timeEl(k.since)),
      el("td", { class: "reason" }, k.reason || "-", k.hold_until ? el("div", { class: "muted" }, "hold ends ", timeEl(k.hold_until)) : null),
      el("td", {}, el("div", {}, k.next_action), buttons.length ? el("div", { class: "actions" }, ...buttons) : null));
  }));
  $("#stuck-empty").hidden = keys.length > 0;
}

function renderDLQ(dls) {
  $("#dlq tbody").replaceChildren(...dls.map((d) => el("tr", { dataset: { seq: String(d.seq) } },
    el("td", {}, d.seq),
    el("td", {}, d.partitionkey || "-"),
    el("td", {}, v(d.objectversion)),
    el("td", {}, (d.source || "?") + " / " + (d.id || "?")),
    el("td", {}, d.attempts),
    el("td", { class: "dead-at" }, timeEl(d.dead_at)),
    el("td", { class: "reason" }, el("div", {}, d.reason), el("div", { class: "muted" }, d.last_error)),
    el("td", { class: "actions" }, actionButton("redrive", d.seq, `/v1/admin/dlq/${d.seq}/redrive`),
      actionButton("skip", d.seq, `/v1/admin/dlq/${d.seq}/skip`)))));
  $("#dlq-empty").hidden = dls.length > 0;
}

// rendered holds what each part of the page was last drawn from: a part
// is drawn again only when its data changed (times tick in place), so a
// button does not move under the pointer and a tooltip stays open.
let rendered = {};

// VOLATILE are the fields that change with the clock alone.
const VOLATILE = ["now", "uptime_seconds", "oldest_stuck_age_seconds", "age_seconds", "series"];

function renderChanged(name, data, render) {
  const key = JSON.stringify(data, (k, val) => VOLATILE.includes(k) ? undefined : val);
  if (rendered[name] === key) return;
  rendered[name] = key;
  render(data);
}

let refreshing = false;
async function refresh() {
  if (refreshing || !token()) return;
  refreshing = true;
  try {
    const [o, keys, dlq, cols] = await Promise.all([
      api("/v1/admin/overview"), api("/v1/admin/keys"), api("/v1/admin/dlq"), api("/v1/admin/collisions")]);
    showApp();
    syncClock(o.now);
    renderChanged("overview", o, renderOverview);
    renderChanged("chart", { points: o.series.map((p) => [p.start, p.counts]), bucket: o.bucket_seconds }, () => renderChart(o.series, o.bucket_seconds));
    renderChanged("keys", keys.keys, renderKeys);
    renderChanged("dlq", dlq.dead_letters, renderDLQ);
    renderChanged("collisions", cols.collisions, renderCollisions);
    tickTimes();
    document.body.dataset.loaded = "true";
    if ($("#status").dataset.kind === "refresh") setStatus("", "");
  } catch (e) {
    if (e instanceof Unauthorized) loggedOut(e.message);
    else setStatus("refresh", "refresh failed: " + e.message);
  } finally {
    refreshing = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  initActions();
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken($("#token").value);
    $("#token").value = "";
    refresh();
  });
  $("#logout").addEventListener("click", () => loggedOut(""));
  if (token()) refresh(); else showLogin("");
  setInterval(refresh, REFRESH_MS);
});
