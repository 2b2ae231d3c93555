// Building DOM and SVG from data without innerHTML (text is always text), and formatting numbers and times.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(element, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") element.textContent = String(value);
    else if (key.startsWith("on") && typeof value === "function") element.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** h("a", {href: "#", class: "x"}, "text", otherNode): an HTML element. */
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** s("rect", {x: 1, ...}): an SVG element. */
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function replace(element, ...children) {
  element.replaceChildren();
  return fill(element, {}, children);
}

/** A section with a heading and a body to fill later. */
export function panel(title, id, ...children) {
  return h("section", { class: "panel", id }, h("h2", { text: title }), h("div", { class: "body" }, ...children));
}

export function seconds(value) {
  if (!Number.isFinite(value)) return "";
  const total = Math.max(0, Math.round(value));
  if (total < 60) return `${total}s`;
  if (total < 3600) return `${Math.floor(total / 60)}m${String(total % 60).padStart(2, "0")}s`;
  if (total < 86400) return `${Math.floor(total / 3600)}h${String(Math.floor((total % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(total / 86400)}d${Math.floor((total % 86400) / 3600)}h`;
}

export function parseTime(iso) {
  const value = iso ? Date.parse(iso) : NaN;
  return Number.isFinite(value) ? value : null;
}

/** "5m12s" since an ISO time, or "" when there is none. */
export function age(iso, now = Date.now()) {
  const time = parseTime(iso);
  return time === null ? "" : seconds((now - time) / 1000);
}

/** "in 1h05m" until an ISO time, "" when there is none. */
export function until(iso, now = Date.now()) {
  const time = parseTime(iso);
  if (time === null) return "";
  return time <= now ? "any moment" : `in ${seconds((time - now) / 1000)}`;
}

export function clock(iso) {
  const time = parseTime(iso);
  return time === null ? "" : new Date(time).toLocaleString();
}

/** A number for people: 4 significant digits, "" for none. */
export function num(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "";
  if (value !== 0 && (Math.abs(value) >= 1e6 || Math.abs(value) < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}

export function phaseBadge(phase) {
  const known = ["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"];
  const name = known.includes(phase) ? phase.toLowerCase() : "unknown";
  return h("span", { class: `phase phase-${name}`, text: phase || "Unknown" });
}

/** A progress bar (SVG, no inline style) with its percent. */
export function progressBar(percent) {
  const value = Number.isFinite(percent) ? Math.max(0, Math.min(100, percent)) : null;
  const bar = s("svg", { class: "bar", viewBox: "0 0 100 8", preserveAspectRatio: "none", "aria-hidden": "true" },
    s("rect", { class: "bar-track", width: 100, height: 8 }),
    value === null ? null : s("rect", { class: "bar-fill", width: value, height: 8 }));
  return h("span", { class: "progress", role: "progressbar", "aria-valuenow": value ?? "" },
    bar, h("span", { class: "percent", text: value === null ? "" : `${Math.round(value)}%` }));
}

export function message(kind, text) {
  return h("p", { class: `message ${kind}`, role: kind === "error" ? "alert" : "status", text });
}

/** Run `work` at most once per `ms`, the last call always honoured. */
export function throttle(work, ms) {
  let timer = null;
  let again = false;
  const run = () => {
    timer = null;
    if (again) {
      again = false;
      work();
      timer = setTimeout(run, ms);
    }
  };
  const call = () => {
    if (timer) {
      again = true;
      return;
    }
    work();
    timer = setTimeout(run, ms);
  };
  call.cancel = () => { clearTimeout(timer); timer = null; again = false; };
  return call;
}
