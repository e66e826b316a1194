// The outcomes chart: one line per outcome seen, over the server's last
// ten minutes, with a time axis (clock times, the browser's zone) and a
// value axis (results per bucket).
"use strict";

const OUTCOME_COLORS = {
  applied: "#067647", duplicate: "#98a2b3", collision: "#b42318", semantic_duplicate: "#7a5af8",
  stale: "#667085", version_conflict: "#d92d20", held: "#dc6803", expired: "#475467",
  blocked: "#f04438", retry: "#fdb022", dead_lettered: "#912018", rejected: "#3e4784",
};

const CHART = { W: 1000, H: 230, L: 56, R: 16, T: 14, B: 44 };

// niceStep is a round tick step (1, 2 or 5 times a power of ten) that
// cuts max into about four.
function niceStep(max) {
  const raw = Math.max(1, max / 4);
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

function clockLabel(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
}

function yAxis(top, bucketSeconds) {
  const { W, H, L, R, T, B } = CHART;
  const step = niceStep(top);
  const g = svg("g", { class: "axis-y" });
  const y = (n) => H - B - (n / top) * (H - T - B);
  for (let n = 0; n <= top; n += step) {
    g.append(svg("line", { x1: L, x2: W - R, y1: y(n), y2: y(n), class: n === 0 ? "axis" : "grid" }));
    g.append(svg("text", { x: L - 6, y: y(n) + 4, "text-anchor": "end" }, n));
  }
  g.append(svg("text", { class: "axis-title", transform: `translate(14 ${(T + H - B) / 2}) rotate(-90)`, "text-anchor": "middle" },
    "results per " + bucketSeconds + " s"));
  return g;
}

function xAxis(series, x) {
  const { H, L, B } = CHART;
  const g = svg("g", { class: "axis-x" });
  g.append(svg("line", { x1: L, x2: L, y1: CHART.T, y2: H - B, class: "axis" }));
  series.forEach((p, i) => {
    const ms = parseTime(p.start);
    if (new Date(ms).getSeconds() !== 0) return; // a tick on each whole minute
    g.append(svg("line", { x1: x(i), x2: x(i), y1: H - B, y2: H - B + 5, class: "axis" }));
    // A label at an edge is anchored inside the chart, not cut off.
    const anchor = x(i) < L + 24 ? "start" : x(i) > CHART.W - CHART.R - 24 ? "end" : "middle";
    g.append(svg("text", { x: x(i), y: H - B + 18, "text-anchor": anchor, "data-start": p.start }, clockLabel(ms)));
  });
  g.append(svg("text", { class: "axis-title", x: (L + CHART.W) / 2, y: H - 4, "text-anchor": "middle" },
    "time (your clock; the last point is the bucket now filling)"));
  return g;
}

function renderChart(series, bucketSeconds) {
  const { W, H, L, R, T, B } = CHART;
  const outcomes = Object.keys(OUTCOME_COLORS).filter((k) => series.some((p) => p.counts[k]));
  let max = 1;
  for (const p of series) for (const k of outcomes) max = Math.max(max, p.counts[k] || 0);
  const top = Math.ceil(max / niceStep(max)) * niceStep(max);
  const x = (i) => L + (i * (W - L - R)) / Math.max(1, series.length - 1);
  const y = (n) => H - B - (n / top) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "results per " + bucketSeconds + " seconds, by outcome" });
  root.append(yAxis(top, bucketSeconds), xAxis(series, x));
  for (const k of outcomes) {
    const line = svg("polyline", { points: series.map((p, i) => `${x(i).toFixed(1)},${y(p.counts[k] || 0).toFixed(1)}`).join(" "),
      fill: "none", stroke: OUTCOME_COLORS[k], "stroke-width": 2, dataset: { outcome: k } });
    line.append(svg("title", {}, k));
    root.append(line);
  }
  $("#chart").replaceChildren(root);
  $("#chart-note").textContent = "(per " + bucketSeconds + " s, last " + Math.round((series.length * bucketSeconds) / 60) + " min)";
  $("#legend").replaceChildren(...outcomes.map((k) => el("span", {}, el("i", { color: OUTCOME_COLORS[k] }), k)));
}
