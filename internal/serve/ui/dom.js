// DOM helpers of the seqbox dashboard. Every value from the server is
// inserted as text, never as markup.
"use strict";

const $ = (sel) => document.querySelector(sel);

// el builds an element: props are attributes, except class, dataset,
// onclick and color (a background set through the CSSOM, which the page's
// CSP allows); children are nodes or text.
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  setProps(e, props);
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(visible(String(c))));
  }
  return e;
}

// INVISIBLE are the characters that change how text around them reads
// without showing themselves: bidirectional overrides and isolates
// (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), zero-width
// characters (U+200B–U+200D, U+2060–U+2064, U+FEFF) and the line and
// paragraph separators. A key "evil\u202Eexe.txt" read "eviltxt.exe".
const INVISIBLE = /[\u061C\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;

// visible writes each invisible character as its escape (\u202e), as the
// CLI prints it.
function visible(s) {
  return s.replace(INVISIBLE, (ch) => "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0"));
}

function setProps(e, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined) continue;
    if (k === "class") e.setAttribute("class", v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else if (k === "color") e.style.background = v;
    else e.setAttribute(k, v);
  }
}

const SVG_NS = "http://www.w3.org/2000/svg";

// svg builds an SVG element the way el builds an HTML one.
function svg(tag, props, text) {
  const e = document.createElementNS(SVG_NS, tag);
  setProps(e, props);
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// v shows a value, or "-" for none.
function v(x) { return x === null || x === undefined ? "-" : String(x); }

// seg is s as one segment of an admin API path: "." and ".." as %2E,
// which the browser would otherwise take for the current or parent
// directory and drop (encodeURIComponent leaves dots as they are).
function seg(s) { s = String(s); return s === "." || s === ".." ? "%2E".repeat(s.length) : encodeURIComponent(s); }

// href of a page of the dashboard (the part after #).
function pageHref(...parts) { return "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/"); }

// keyEl is a partition key as a link to its page; a key is never broken
// across lines (.key keeps it whole).
function keyEl(key) {
  if (!key) return el("span", { class: "muted" }, "-");
  return el("a", { class: "key", href: pageHref("key", key), title: visible(key), dataset: { key } }, key);
}

// dlEl links to a dead letter's page.
function dlEl(seq) {
  return el("a", { class: "dl-link", href: pageHref("dlq", seq), dataset: { seq: String(seq) } }, String(seq));
}

// LONG is how many characters of a reason show before it collapses.
const LONG = 140;

// reasonEl shows a reason or an error: whole when short, else collapsed to
// its first line or characters, the rest a click away.
function reasonEl(text, cls) {
  const s = text === null || text === undefined || text === "" ? "-" : String(text);
  const firstLine = s.split("\n")[0];
  if (s.length <= LONG && firstLine === s) return el("span", { class: cls || "" }, s);
  const head = firstLine.length > LONG ? firstLine.slice(0, LONG).replace(/\s+\S*$/, "") : firstLine;
  return el("details", { class: "long " + (cls || "") },
    el("summary", { title: "show all " + s.length + " characters" }, head + " …"), el("div", { class: "full" }, s));
}

// outcomeEl is an outcome's name, colored as on the chart.
function outcomeEl(outcome) {
  return el("span", { class: "outcome outcome-" + outcome, dataset: { outcome } }, outcome);
}

// JSON_DEPTH is how many levels of a JSON value the dashboard draws;
// deeper ones show as […] or {…} (the bytes as stored show them whole).
// A payload nested thousands of levels deep overflowed the browser's stack
// and left a page half drawn.
const JSON_DEPTH = 64;

// jsonText is JSON.stringify(value), or JSON.stringify(value, null, 2)
// when pretty, with the levels past JSON_DEPTH cut.
function jsonText(value, pretty, depth = 0) {
  if (value === null || typeof value !== "object") {
    const s = JSON.stringify(value);
    return s === undefined ? "null" : s;
  }
  if (depth >= JSON_DEPTH) return Array.isArray(value) ? "[…]" : "{…}";
  const nl = pretty ? "\n" + "  ".repeat(depth + 1) : "";
  const end = pretty ? "\n" + "  ".repeat(depth) : "";
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return "[" + value.map((x) => nl + jsonText(x, pretty, depth + 1)).join(",") + end + "]";
  }
  const keys = Object.keys(value);
  if (keys.length === 0) return "{}";
  return "{" + keys.map((k) => nl + JSON.stringify(k) + (pretty ? ": " : ":") + jsonText(value[k], pretty, depth + 1)).join(",") + end + "}";
}

// jsonView shows a value as indented JSON.
function jsonView(value) {
  return el("pre", { class: "json-pretty" }, jsonText(value, true));
}
