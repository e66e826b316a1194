// Collisions: the two envelopes of one identity side by side, with the
// fields that differ marked (the API's diff: top-level attributes and
// data's keys, recursively) and listed above them.
"use strict";

const pathKey = (path) => JSON.stringify(path);

// jsonBlock renders value as indented JSON lines; a field in marks gets
// the class of its change, and says it on hover.
function jsonBlock(key, value, path, marks, depth, comma) {
  const mark = marks.get(pathKey(path));
  const pad = "  ".repeat(depth);
  const label = key === null ? "" : JSON.stringify(key) + ": ";
  const props = { class: "jl" + (mark ? " diff-" + mark.change : ""), dataset: { path: path.join(".") } };
  if (mark) props.title = mark.change + ": first " + shown(mark, "first") + ", second " + shown(mark, "second");
  const end = comma ? "," : "";
  if (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length > 0 && depth < JSON_DEPTH) {
    const keys = Object.keys(value);
    return el("div", props, el("div", {}, pad + label + "{"),
      ...keys.map((k, i) => jsonBlock(k, value[k], path.concat(k), marks, depth + 1, i < keys.length - 1)),
      el("div", {}, pad + "}" + end));
  }
  return el("div", props, pad + label + jsonText(value, false, depth) + end);
}

// shown is one side of a field diff as JSON text, or "absent".
function shown(d, side) { return side in d ? jsonText(d[side]) : "absent"; }

// payloadView shows one envelope: marked JSON when it parses, else as
// kept.
function payloadView(p, marks, side) {
  if (!p) return el("pre", { class: side }, "(not kept: purged by retention)");
  if (p.text === undefined) return el("pre", { class: side }, "(binary, base64) " + p.base64);
  let doc;
  try { doc = JSON.parse(p.text); } catch (_) { return el("pre", { class: side }, p.text); }
  return el("div", { class: "json " + side }, jsonBlock(null, doc, [], marks, 0, false));
}

// diffSummary lists the differing fields, one row each.
function diffSummary(diff) {
  if (diff === null || diff === undefined) return el("p", { class: "muted" }, "The two payloads cannot be compared field by field.");
  if (diff.length === 0) return el("p", { class: "muted" }, "No field differs (the bytes do: spacing or key order).");
  const cell = (d, side) => side in d ? el("code", {}, jsonText(d[side])) : el("span", { class: "muted" }, "absent");
  return el("table", { class: "diff-summary" },
    el("thead", {}, el("tr", {}, el("th", {}, "field"), el("th", {}, "change"), el("th", {}, "first"), el("th", {}, "second"))),
    el("tbody", {}, ...diff.map((d) => el("tr", { class: "diff-" + d.change, dataset: { path: d.path.join("."), change: d.change } },
      el("td", {}, d.path.join(".")), el("td", {}, d.change), el("td", {}, cell(d, "first")), el("td", {}, cell(d, "second"))))));
}

function collisionView(c) {
  const marks = new Map((c.diff || []).map((d) => [pathKey(d.path), d]));
  const n = (c.diff || []).length;
  return el("div", { class: "collision", dataset: { source: c.source, id: c.id } },
    el("div", {}, el("strong", {}, c.source + " / " + c.id), " ",
      el("span", { class: "muted" }, (c.partitionkey || "no key") + " · "), timeEl(c.at),
      el("span", { class: "muted" }, c.diff ? " · " + n + (n === 1 ? " field differs" : " fields differ") : "")),
    el("div", { class: "muted" }, c.reason),
    diffSummary(c.diff),
    el("div", { class: "pair" },
      el("div", {}, el("div", {}, "first (" + (c.first_outcome || "?") + ")"), payloadView(c.first, marks, "first")),
      el("div", {}, el("div", {}, "second (parked)"), payloadView(c.second, marks, "second"))));
}

function renderCollisions(cs) {
  $("#collisions").replaceChildren(...cs.map(collisionView));
  $("#collisions-empty").hidden = cs.length > 0;
}
