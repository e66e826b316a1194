// The admin API as the dashboard calls it, with the admin token the
// operator entered. The token lives in this tab's sessionStorage only.
"use strict";

const TOKEN_KEY = "seqbox.adminToken";

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); }

// Unauthorized is a 401: the token is missing or wrong.
class Unauthorized extends Error {}

// api calls the admin API and returns the decoded body; a problem answer
// throws with its detail.
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
