// The outcomes chart: a stacked bar per bucket of the server's last ten
// minutes, over a time axis (clock times, the browser's zone) and a value
// axis (results per bucket). The failures sit at the bottom of each bar
// and the value axis is logarithmic by default, so that a spike of
// applied events does not flatten one dead letter to nothing; every
// non-zero part of a bar is at least MIN_PX high on either scale. Nothing
// is drawn before the server started: it does not know what happened then.
"use strict";

const OUTCOME_COLORS = {
  applied: "#067647", duplicate: "#98a2b3", collision: "#b42318", semantic_duplicate: "#7a5af8",
  stale: "#667085", version_conflict: "#d92d20", held: "#dc6803", expired: "#475467",
  blocked: "#f04438", retry: "#fdb022", dead_lettered: "#912018", rejected: "#3e4784",
};

// STACK is the order of a bar's parts, bottom first: what needs an
// operator first, applied last.
const STACK = ["dead_lettered", "rejected", "blocked", "collision", "version_conflict", "expired", "held", "retry",
  "stale", "semantic_duplicate", "duplicate", "applied"];

const CHART = { W: 1000, H: 230, L: 56, R: 16, T: 14, B: 44 };

// MIN_PX is the least height of a non-zero part of a bar.
const MIN_PX = 3;

const SCALE_KEY = "seqbox.chartScale";
function chartScale() { return sessionStorage.getItem(SCALE_KEY) === "linear" ? "linear" : "log"; }

// niceStep is a round tick step (1, 2 or 5 times a power of ten) that
// cuts max into about four.
function niceStep(max) {
  const raw = Math.max(1, max / 4);
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

// logTicks are 0 and 1, 2, 5, 10, 20, 50… up to the first at or above max.
function logTicks(max) {
  const out = [0];
  for (let pow = 1; ; pow *= 10) {
    for (const m of [1, 2, 5]) {
      out.push(m * pow);
      if (m * pow >= max) return out;
    }
  }
}

// valueScale maps a count to a height fraction, with the axis's ticks.
function valueScale(kind, max) {
  if (kind === "log") {
    const ticks = logTicks(Math.max(1, max));
    const top = ticks[ticks.length - 1];
    return { kind, ticks, f: (n) => Math.log10(1 + n) / Math.log10(1 + top) };
  }
  const step = niceStep(max);
  const top = Math.max(step, Math.ceil(max / step) * step);
  const ticks = [];
  for (let n = 0; n <= top; n += step) ticks.push(n);
  return { kind, ticks, f: (n) => n / top };
}

function clockLabel(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
}

function yAxis(scale, y, bucketSeconds) {
  const { W, L, R, T, H, B } = CHART;
  const g = svg("g", { class: "axis-y" });
  let last = Infinity;
  for (const n of scale.ticks) {
    if (last - y(n) < 12) continue; // too close to the tick below to read
    last = y(n);
    g.append(svg("line", { x1: L, x2: W - R, y1: y(n), y2: y(n), class: n === 0 ? "axis" : "grid" }));
    g.append(svg("text", { x: L - 6, y: y(n) + 4, "text-anchor": "end" }, n));
  }
  g.append(svg("text", { class: "axis-title", transform: `translate(14 ${(T + H - B) / 2}) rotate(-90)`, "text-anchor": "middle" },
    "results per " + bucketSeconds + " s" + (scale.kind === "log" ? " (log)" : "")));
  return g;
}

function xAxis(from, to, x) {
  const { H, L, B, W, R } = CHART;
  const g = svg("g", { class: "axis-x" });
  g.append(svg("line", { x1: L, x2: L, y1: CHART.T, y2: H - B, class: "axis" }));
  for (let t = Math.ceil(from / 60000) * 60000; t <= to; t += 60000) { // a tick on each whole minute
    g.append(svg("line", { x1: x(t), x2: x(t), y1: H - B, y2: H - B + 5, class: "axis" }));
    // A label at an edge is anchored inside the chart, not cut off.
    const anchor = x(t) < L + 24 ? "start" : x(t) > W - R - 24 ? "end" : "middle";
    g.append(svg("text", { x: x(t), y: H - B + 18, "text-anchor": anchor, "data-start": new Date(t).toISOString() }, clockLabel(t)));
  }
  g.append(svg("text", { class: "axis-title", x: (L + W) / 2, y: H - 4, "text-anchor": "middle" },
    "time (your clock; the last bar is the bucket now filling)"));
  return g;
}

// bar is one bucket's stacked parts, bottom first.
function bar(p, x0, width, y) {
  const g = svg("g", { class: "bar", dataset: { start: p.start } });
  let count = 0;
  let bottom = y(0);
  const parts = [];
  for (const k of STACK) {
    const n = p.counts[k] || 0;
    if (!n) continue;
    count += n;
    const top = Math.min(y(count), bottom - MIN_PX);
    const r = svg("rect", { x: x0.toFixed(1), y: top.toFixed(1), width: width.toFixed(1), height: (bottom - top).toFixed(1),
      fill: OUTCOME_COLORS[k], dataset: { outcome: k, count: String(n) } });
    r.append(svg("title", {}, clockLabel(parseTime(p.start)) + ": " + n + " " + k));
    g.append(r);
    parts.push(n + " " + k);
    bottom = top;
  }
  if (parts.length) g.prepend(svg("title", {}, parts.join(", ")));
  return g;
}

// renderChart draws o's series (the overview's): bucket_seconds,
// window_seconds, started_at and the points since then.
function renderChart(o) {
  const { W, H, L, R, T, B } = CHART;
  const series = o.series;
  const bucket = o.bucket_seconds * 1000;
  const to = series.length ? parseTime(series[series.length - 1].start) + bucket : Math.floor(serverNowMs() / bucket) * bucket + bucket;
  const from = to - o.window_seconds * 1000;
  const x = (t) => L + ((t - from) / (to - from)) * (W - L - R);
  let max = 0;
  const seen = {};
  for (const p of series) {
    let total = 0;
    for (const [k, n] of Object.entries(p.counts)) { total += n; seen[k] = (seen[k] || 0) + n; }
    max = Math.max(max, total);
  }
  const scale = valueScale(chartScale(), max);
  const y = (n) => H - B - scale.f(n) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", dataset: { scale: scale.kind },
    "aria-label": "results per " + o.bucket_seconds + " seconds, by outcome, stacked" + (scale.kind === "log" ? ", log scale" : "") });
  root.append(yAxis(scale, y, o.bucket_seconds), xAxis(from, to, x));
  const started = parseTime(o.started_at);
  if (started > from) {
    const g = svg("g", { class: "started" });
    g.append(svg("line", { x1: x(started), x2: x(started), y1: T, y2: H - B, class: "start-line" }));
    const nearEnd = x(started) > W - R - 120;
    g.append(svg("text", { x: x(started) + (nearEnd ? -4 : 4), y: T + 10, "text-anchor": nearEnd ? "end" : "start" }, "server started"));
    root.append(g);
  }
  const width = Math.max(1, ((W - L - R) * bucket) / (to - from) - 2);
  for (const p of series) {
    if (!Object.values(p.counts).some((n) => n > 0)) continue;
    // The bucket the server started in is drawn from its start only.
    const x0 = x(parseTime(p.start)) + 1;
    const left = Number.isNaN(started) ? x0 : Math.max(x0, x(started));
    root.append(bar(p, left, Math.max(1, width - (left - x0)), y));
  }
  $("#chart").replaceChildren(root);
  const since = started > from ? "; the server started " + relative((started - serverNowMs()) / 1000) : "";
  $("#chart-note").textContent = "(per " + o.bucket_seconds + " s, last " + Math.round(o.window_seconds / 60) + " min" + since + ")";
  $("#legend").replaceChildren(...STACK.filter((k) => seen[k]).map((k) =>
    el("span", { dataset: { outcome: k } }, el("i", { color: OUTCOME_COLORS[k] }), k + " " + seen[k])));
  for (const b of document.querySelectorAll(".scale button")) b.setAttribute("aria-pressed", String(b.dataset.scale === scale.kind));
}
