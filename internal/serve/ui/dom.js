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
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
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
