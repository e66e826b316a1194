// Operator actions: release a key, redrive or skip a dead letter (one, or
// a selection together), resolve an uncertain call. Each opens one dialog
// that asks who and why (recorded on the operator request, on the gap a
// release or skip records, on the ledger row a resolution settles), then
// calls the admin API and says how it went: success as success, failure
// as failure, item by item for a selection.
"use strict";

const BY_KEY = "seqbox.by";

// ACTIONS says, per action, what the dialog explains and whether the API
// requires a reason (it does for the gap decisions: release and skip,
// and for a resolution).
const ACTIONS = {
  release: { noun: "key", nouns: "keys", confirm: "Release", reasonRequired: true,
    what: "Records a gap for the missing version(s) and applies what waits behind the key, in order. Do this when the missing version will never come." },
  redrive: { noun: "dead letter", nouns: "dead letters", confirm: "Redrive", reasonRequired: false,
    what: "Delivers the dead-lettered message again; the messages parked behind it follow once it applies. Fix the cause first, or it is dead-lettered again (it keeps its number)." },
  skip: { noun: "dead letter", nouns: "dead letters", confirm: "Skip", reasonRequired: true,
    what: "Gives the dead-lettered message up with a recorded gap; its key goes on with the next version." },
  resolve: { noun: "call", nouns: "calls", confirm: "Resolve", reasonRequired: true,
    what: "Settles an uncertain call by hand, as `seqbox effects resolve` does: say what the agent shows." },
};

// pending is the dialog last opened: {kind: "one", action, target, path},
// {kind: "bulk", action, seqs} or {kind: "resolve", key, label}.
let pending = null;

// actionButton is a button for one action the API offers on target.
function actionButton(action, target, path) {
  return el("button", { class: "act " + action, type: "button", dataset: { action, target: String(target) },
    onclick: () => openAction(action, String(target), path) }, action);
}

// openDialog fills the dialog's common parts and shows it.
function openDialog(action, title, what, items, extra) {
  const a = ACTIONS[action];
  $("#action-title").textContent = visible(title);
  $("#action-what").textContent = what + " Who and why are recorded with the request.";
  $("#action-items").replaceChildren(...(items || []).map((t) => el("li", {}, t)));
  $("#action-items").hidden = !items || items.length === 0;
  $("#action-extra").hidden = !extra;
  $("#action-by").value = sessionStorage.getItem(BY_KEY) || "";
  $("#action-reason").value = "";
  $("#action-reason").placeholder = a.reasonRequired ? "why (required)" : "why (optional for a redrive)";
  $("#action-error").textContent = "";
  $("#action-confirm").className = "act " + action;
  $("#action-dialog").showModal();
  $(sessionStorage.getItem(BY_KEY) ? "#action-reason" : "#action-by").focus();
}

function openAction(action, target, path) {
  const a = ACTIONS[action];
  pending = { kind: "one", action, target, path };
  openDialog(action, a.confirm + " " + a.noun + " " + target, a.what);
  $("#action-confirm").textContent = a.confirm;
}

// openBulk asks once for a selection of dead letters, naming the count.
function openBulk(action, seqs) {
  const a = ACTIONS[action];
  const n = seqs.length;
  pending = { kind: "bulk", action, seqs: seqs.slice() };
  openDialog(action, `${a.confirm} ${n} ${n === 1 ? a.noun : a.nouns}`,
    `${a.what} Each is its own request, one after the other, in the order listed.`,
    seqs.map((s) => a.noun + " " + s));
  $("#action-confirm").textContent = `${a.confirm} ${n} ${n === 1 ? a.noun : a.nouns}`;
}

// openResolve asks how an uncertain call ended.
function openResolve(key, label) {
  pending = { kind: "resolve", key, label };
  openDialog("resolve", "Resolve the uncertain call of " + label, ACTIONS.resolve.what, [], true);
  for (const id of ["#resolve-succeeded", "#resolve-failed"]) $(id).checked = false;
  $("#resolve-ref").value = "";
  $("#action-confirm").textContent = "Resolve";
  $("#resolve-succeeded").focus();
}

function setStatus(kind, text) {
  const s = $("#status");
  s.className = "status-" + kind;
  s.dataset.kind = kind;
  s.textContent = visible(text);
}

// ownResult is the last result of the action's own message: the first
// result's identity (the successors it let out come after it), as the
// CLI judges it (ops.Acted.Own).
function ownResult(results) {
  let own = results[0];
  for (const r of results.slice(1)) {
    if (own && own.id && r.source === own.source && r.id === own.id) own = r;
  }
  return own;
}

// describeResult says what an executed action did; ok is false when a
// redriven message failed again (and names its dead letter, which keeps
// its number): judged by its own message's last result, not the first
// (a redrive retried and then dead-lettered read "done").
function describeResult(action, target, res) {
  const a = ACTIONS[action];
  const results = res.results || res.decisions || [];
  const own = ownResult(results);
  const head = `request ${res.request}: ${action} of ${a.noun} ${target}`;
  if (own && (own.outcome === "dead_lettered" || own.outcome === "rejected") && action === "redrive") {
    const as = res.dead_letter ? " (still dead letter " + res.dead_letter + ")" : "";
    const rest = `ran, but the message failed again and is dead-lettered${as}: ${own.reason}`;
    return { ok: false, request: res.request, rest, text: `${head} ${rest}` };
  }
  const outcomes = results.map((d) => d.outcome).join(", ") || "nothing to apply";
  const rest = `done (${outcomes}), by ${res.by}`;
  return { ok: true, request: res.request, rest, text: `${head} ${rest}` };
}

// post sends an action's body to path.
function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

async function runOne(p, by, reason) {
  const { action, target, path } = p;
  setStatus("busy", `${action} of ${ACTIONS[action].noun} ${target}…`);
  try {
    const r = describeResult(action, target, await post(path, { by, reason }));
    setStatus(r.ok ? "ok" : "bad", r.text);
  } catch (e) {
    if (e instanceof Unauthorized) throw e;
    setStatus("bad", `${action} of ${ACTIONS[action].noun} ${target} failed: ${e.message}`);
  }
}

// runBulk acts on each dead letter in turn and lists how each went.
async function runBulk(p, by, reason) {
  const { action, seqs } = p;
  const a = ACTIONS[action];
  const list = $("#bulk-results-list");
  list.replaceChildren();
  $("#bulk-results").hidden = false;
  $("#bulk-results-title").textContent = `${action} of ${seqs.length} ${a.nouns} by ${by}`;
  let ok = 0;
  for (const [i, seq] of seqs.entries()) {
    setStatus("busy", `${action} of ${seqs.length} ${a.nouns}: ${i + 1} of ${seqs.length} (dead letter ${seq})…`);
    let r;
    try {
      r = describeResult(action, seq, await post(`/v1/admin/dlq/${seq}/${action}`, { by, reason }));
    } catch (e) {
      if (e instanceof Unauthorized) throw e;
      r = { ok: false, rest: `failed: ${e.message}` };
    }
    if (r.ok) ok++;
    list.append(el("li", { class: r.ok ? "result-ok" : "result-bad", dataset: { seq: String(seq), ok: String(r.ok), request: r.request ? String(r.request) : "" } },
      el("strong", {}, r.ok ? "done" : "failed"), " · " + a.noun + " ", dlEl(seq), ": " + r.rest + (r.request ? ` (request ${r.request})` : "")));
    selected.delete(String(seq));
  }
  const failed = seqs.length - ok;
  setStatus(failed ? "bad" : "ok", `${action} of ${seqs.length} ${a.nouns}: ${ok} done, ${failed} failed (each listed under the dead letters)`);
}

async function runResolve(p, by, reason) {
  const state = $("#resolve-succeeded").checked ? "succeeded" : "failed";
  const ref = $("#resolve-ref").value.trim();
  setStatus("busy", `resolving the call of ${p.label}…`);
  try {
    const res = await post(`/v1/admin/effects/${seg(p.key)}/resolve`, { state, ref, by, reason });
    setStatus("ok", `the call of ${p.label} is resolved as ${res.state}, by ${res.by}`);
  } catch (e) {
    if (e instanceof Unauthorized) throw e;
    setStatus("bad", `resolving the call of ${p.label} failed: ${e.message}`);
  }
}

// checkDialog says what the dialog still needs, or "" when it is filled.
function checkDialog(p, by, reason) {
  const a = ACTIONS[p.action || "resolve"];
  if (p.kind === "resolve") {
    const state = $("#resolve-succeeded").checked ? "succeeded" : $("#resolve-failed").checked ? "failed" : "";
    if (!state) return "Say what the agent shows: succeeded or failed.";
    if (state === "succeeded" && !$("#resolve-ref").value.trim()) return "A call that succeeded needs the agent's reference of it.";
  }
  if (!by || (a.reasonRequired && !reason)) return a.reasonRequired ? "Say who you are and why: both are recorded." : "Say who you are: it is recorded.";
  return "";
}

async function confirmAction() {
  if (!pending) return;
  const p = pending;
  const by = $("#action-by").value.trim();
  const reason = $("#action-reason").value.trim();
  const missing = checkDialog(p, by, reason);
  if (missing) {
    $("#action-error").textContent = missing;
    return;
  }
  sessionStorage.setItem(BY_KEY, by);
  pending = null;
  $("#action-dialog").close();
  // Focus moves to the status line that will say how it went, not back to
  // the button that opened the dialog (where the confirming Enter's key
  // press would open it again).
  $("#status").focus();
  if (p.kind === "bulk") await runBulk(p, by, reason);
  else if (p.kind === "resolve") await runResolve(p, by, reason);
  else await runOne(p, by, reason);
  await refresh(true);
}

function initActions() {
  $("#action-cancel").addEventListener("click", () => { pending = null; $("#action-dialog").close(); });
  const submit = () => confirmAction().catch((e) => e instanceof Unauthorized ? loggedOut(e.message) : setStatus("bad", e.message));
  $("#action-confirm").addEventListener("click", submit);
  // Enter in who, why or the reference confirms, as in a form (Escape
  // cancels).
  for (const id of ["#action-by", "#action-reason", "#resolve-ref"]) {
    $(id).addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); submit(); } });
  }
}
