// Times on the dashboard: relative to now ("3 min ago", "in 40 s"), with
// the exact time on hover. "Now" is the server's clock (the overview
// carries it), so that ages agree with the ages the API computes.
"use strict";

// serverSkew is the server's clock minus this browser's, in ms.
let serverSkew = 0;

// syncClock takes the server's time from an overview.
function syncClock(serverNow) {
  const t = parseTime(serverNow);
  if (!Number.isNaN(t)) serverSkew = t - Date.now();
}

function serverNowMs() { return Date.now() + serverSkew; }

// parseTime reads RFC 3339 with any number of fractional digits (the API
// gives microseconds; Date.parse wants at most milliseconds).
function parseTime(iso) {
  return Date.parse(String(iso).replace(/(\.\d{3})\d+/, "$1"));
}

// duration formats a length of time: "40 s", "3 min", "5 h", "2 d"
// (whole units, rounded down).
function duration(seconds) {
  const s = Math.abs(seconds);
  if (s < 60) return Math.floor(s) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 48 * 3600) return Math.floor(s / 3600) + " h";
  return Math.floor(s / 86400) + " d";
}

// relative says when something is, given how many seconds from now it
// is (negative: in the past): "3 min ago", "in 40 s", "just now".
function relative(secondsFromNow) {
  if (Math.abs(secondsFromNow) < 1) return "just now";
  return secondsFromNow < 0 ? duration(secondsFromNow) + " ago" : "in " + duration(secondsFromNow);
}

// exactTime is what hovering a time shows: the API's RFC 3339 value and
// the same instant in the browser's time zone.
function exactTime(iso) {
  const t = parseTime(iso);
  return Number.isNaN(t) ? String(iso) : iso + " (" + new Date(t).toLocaleString() + " local)";
}

// timeText is iso as a time element shows it: relative to now, or, in
// mode "age", how long ago it was.
function timeText(iso, mode) {
  const fromNow = (parseTime(iso) - serverNowMs()) / 1000;
  return mode === "age" ? duration(fromNow) : relative(fromNow);
}

// timeEl shows iso relative to now (mode "rel") or as an age ("age"),
// exact on hover; tickTimes keeps it current.
function timeEl(iso, mode) {
  if (!iso) return "-";
  mode = mode || "rel";
  return el("time", { datetime: iso, title: exactTime(iso), dataset: { mode } }, timeText(iso, mode));
}

// tickTimes brings every time on the page up to now, in place.
function tickTimes() {
  for (const e of document.querySelectorAll("time[datetime]")) {
    const text = timeText(e.getAttribute("datetime"), e.dataset.mode);
    if (e.textContent !== text) e.textContent = text;
  }
}
