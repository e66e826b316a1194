// Operator actions: release a key, redrive or skip a dead letter. Each
// button opens a dialog that asks who and why (recorded on the operator
// request, and on the gap a release or skip records), then calls the
// admin API and says how it went: success as success, failure as failure.
"use strict";

const BY_KEY = "seqbox.by";

// ACTIONS says, per action, what the dialog explains and whether the API
// requires a reason (it does for the gap decisions: release and skip).
const ACTIONS = {
  release: { noun: "key", confirm: "Release", reasonRequired: true,
    what: "Records a gap for the missing version(s) and applies what waits behind the key, in order. Do this when the missing version will never come." },
  redrive: { noun: "dead letter", confirm: "Redrive", reasonRequired: false,
    what: "Delivers the dead-lettered message again; the messages parked behind it follow once it applies. Fix the cause first, or it is dead-lettered again." },
  skip: { noun: "dead letter", confirm: "Skip", reasonRequired: true,
    what: "Gives the dead-lettered message up with a recorded gap; its key goes on with the next version." },
};

let pending = null; // {action, target, path} of the dialog last opened

// actionButton is a button for one action the API offers on target.
function actionButton(action, target, path) {
  return el("button", { class: "act " + action, type: "button", dataset: { action, target: String(target) },
    onclick: () => openAction(action, String(target), path) }, action);
}

function openAction(action, target, path) {
  const a = ACTIONS[action];
  pending = { action, target, path };
  $("#action-title").textContent = a.confirm + " " + a.noun + " " + target;
  $("#action-what").textContent = a.what + " Who and why are recorded with the request.";
  $("#action-by").value = sessionStorage.getItem(BY_KEY) || "";
  $("#action-reason").value = "";
  $("#action-reason").placeholder = a.reasonRequired ? "why (required)" : "why (optional for a redrive)";
  $("#action-error").textContent = "";
  $("#action-confirm").textContent = a.confirm;
  $("#action-confirm").className = "act " + action;
  $("#action-dialog").showModal();
  $(sessionStorage.getItem(BY_KEY) ? "#action-reason" : "#action-by").focus();
}

function setStatus(kind, text) {
  const s = $("#status");
  s.className = "status-" + kind;
  s.dataset.kind = kind;
  s.textContent = text;
}

// describeResult says what an executed action did; ok is false when a
// redriven message failed again (and names its dead letter, which keeps
// its number).
function describeResult(action, target, res) {
  const a = ACTIONS[action];
  const results = res.results || res.decisions || [];
  const first = results[0];
  const head = `request ${res.request}: ${action} of ${a.noun} ${target}`;
  if (first && (first.outcome === "dead_lettered" || first.outcome === "rejected") && action === "redrive") {
    const as = res.dead_letter ? " (still dead letter " + res.dead_letter + ")" : "";
    return { ok: false, text: `${head} ran, but the message failed again and is dead-lettered${as}: ${first.reason}` };
  }
  const outcomes = results.map((d) => d.outcome).join(", ") || "nothing to apply";
  return { ok: true, text: `${head} done (${outcomes}), by ${res.by}` };
}

async function confirmAction() {
  if (!pending) return;
  const { action, target, path } = pending;
  const by = $("#action-by").value.trim();
  const reason = $("#action-reason").value.trim();
  if (!by || (ACTIONS[action].reasonRequired && !reason)) {
    $("#action-error").textContent = ACTIONS[action].reasonRequired ? "Say who you are and why: both are recorded." : "Say who you are: it is recorded.";
    return;
  }
  sessionStorage.setItem(BY_KEY, by);
  pending = null;
  $("#action-dialog").close();
  setStatus("busy", `${action} of ${ACTIONS[action].noun} ${target}…`);
  // Focus moves to the status line that will say how it went, not back to
  // the button that opened the dialog (where the confirming Enter's key
  // press would open it again).
  $("#status").focus();
  try {
    const res = await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ by, reason }) });
    const r = describeResult(action, target, res);
    setStatus(r.ok ? "ok" : "bad", r.text);
  } catch (e) {
    if (e instanceof Unauthorized) throw e;
    setStatus("bad", `${action} of ${ACTIONS[action].noun} ${target} failed: ${e.message}`);
  }
  await refresh();
}

function initActions() {
  $("#action-cancel").addEventListener("click", () => $("#action-dialog").close());
  const submit = () => confirmAction().catch((e) => e instanceof Unauthorized ? loggedOut(e.message) : setStatus("bad", e.message));
  $("#action-confirm").addEventListener("click", submit);
  // Enter in who or why confirms, as in a form (Escape cancels).
  for (const id of ["#action-by", "#action-reason"]) {
    $(id).addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); submit(); } });
  }
}
