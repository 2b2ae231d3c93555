// The timeline of a job (GET .../timeline) drawn as SVG: one row per job, attempt and pod, spans on a time axis,
// failures marked by class, node refusals (also listed in words), checkpoints, evaluations; and the Chrome trace
// download.

import { download, jobPath } from "./api.js";
import { h, message, parseTime, s, seconds } from "./dom.js";
import { goodputText } from "./goodput.js";

const LABEL_W = 190;
const RIGHT = 16;
const AXIS_H = 26;
const ROW_H = 24;
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
  604800].map((n) => n * 1000);

/** A class-name-safe word from data. */
const word = (value) => String(value ?? "").toLowerCase().replace(/[^a-z0-9-]/g, "");

function timeTicks(t0, t1, count = 8) {
  const step = STEPS.find((candidate) => (t1 - t0) / candidate <= count) || STEPS[STEPS.length - 1];
  const found = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) found.push(t);
  return { step, found };
}

function tickLabel(t, step) {
  const date = new Date(t);
  if (step >= 86400000) return date.toLocaleDateString();
  const second = step < 60000 ? "2-digit" : undefined;
  return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second });
}

function markShape(mark, x, y) {
  const title = s("title", { text: `${mark.label || mark.kind} (${new Date(parseTime(mark.time)).toLocaleString()})` });
  const attrs = { class: `mark mark-${word(mark.kind)} fc-${word(mark.failureClass)}`, "data-kind": word(mark.kind) };
  if (mark.kind === "failure") {
    return s("path", { ...attrs, d: `M${x - 6},${y - 8} L${x + 6},${y - 8} L${x},${y + 2} Z` }, title);
  }
  if (mark.kind === "checkpoint") return s("circle", { ...attrs, cx: x, cy: y, r: 4 }, title);
  if (mark.kind === "evaluation") {
    return s("path", { ...attrs, d: `M${x},${y - 5} L${x + 4},${y} L${x},${y + 5} L${x - 4},${y} Z` }, title);
  }
  return s("g", attrs, s("line", { x1: x, x2: x, y1: y - 9, y2: y + 9 }), s("circle", { cx: x, cy: y, r: 3 }), title);
}

/** The SVG of a timeline document, `width` pixels wide. */
export function drawTimeline(data, width) {
  const t0 = parseTime(data.start);
  let t1 = parseTime(data.end);
  if (t0 === null || t1 === null) return message("info", "No timeline yet.");
  if (t1 <= t0) t1 = t0 + 1000;
  const rows = (data.rows || []).map((row) => ({ id: String(row.id), label: String(row.label ?? row.id) }));
  const index = new Map(rows.map((row, i) => [row.id, i]));
  const plotW = Math.max(100, width - LABEL_W - RIGHT);
  const x = (iso) => LABEL_W + ((Math.min(Math.max(parseTime(iso) ?? t0, t0), t1) - t0) / (t1 - t0)) * plotW;
  const rowY = (id) => AXIS_H + index.get(id) * ROW_H;
  const height = AXIS_H + rows.length * ROW_H + 4;
  const { step, found } = timeTicks(t0, t1);
  const axis = found.map((t) => {
    const tx = LABEL_W + ((t - t0) / (t1 - t0)) * plotW;
    return s("g", { class: "axis" }, s("line", { class: "grid", x1: tx, x2: tx, y1: AXIS_H - 4, y2: height }),
      s("text", { class: "tick", x: tx, y: AXIS_H - 9, "text-anchor": "middle", text: tickLabel(t, step) }));
  });
  const rowKind = (id) => (id.startsWith("pod:") ? "pod" : id.startsWith("attempt") ? "attempt" : "job");
  const labels = rows.map((row, i) => s("g", { class: `row row-${rowKind(row.id)}`, "data-row": row.id },
    s("rect", { class: "row-band", x: 0, y: AXIS_H + i * ROW_H, width, height: ROW_H }),
    s("text", { class: "row-label", x: row.id.startsWith("pod:") ? 18 : 6, y: AXIS_H + i * ROW_H + 16 },
      row.label.length > 28 ? `${row.label.slice(0, 27)}…` : row.label, s("title", { text: row.label }))));
  const spans = (data.spans || []).filter((span) => index.has(span.row)).map((span) => {
    const left = x(span.start);
    const wide = Math.max(1.5, x(span.end) - left);
    const length = seconds(((parseTime(span.end) ?? t0) - (parseTime(span.start) ?? t0)) / 1000);
    const kind = word(span.kind);
    return s("rect", { class: `span span-${kind}`, "data-kind": kind, x: left, y: rowY(span.row) + 4, width: wide,
      height: ROW_H - 8, rx: 2 }, s("title", { text: `${span.label || span.kind}: ${length}` }));
  });
  const marks = (data.marks || []).filter((mark) => index.has(mark.row))
    .map((mark) => markShape(mark, x(mark.time), rowY(mark.row) + ROW_H / 2));
  return s("svg", { class: "timeline", id: "timeline-svg", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": "timeline" }, labels, axis, spans, marks);
}

function legend(data) {
  const spanKinds = [...new Set((data.spans || []).map((span) => word(span.kind)))];
  const classes = [...new Set((data.marks || []).filter((m) => m.kind === "failure").map((m) => m.failureClass || ""))];
  const others = [...new Set((data.marks || []).filter((m) => m.kind !== "failure").map((m) => word(m.kind)))];
  return h("ul", { class: "legend timeline-legend" },
    spanKinds.map((kind) => h("li", {}, h("span", { class: `swatch span-${kind}` }), kind)),
    classes.map((name) => h("li", {}, h("span", { class: `swatch fc-${word(name)}` }),
      `failure: ${name || "unknown"}`)),
    others.map((kind) => h("li", {}, h("span", { class: `swatch mark-${kind}` }), kind)));
}

/** The timeline panel's content: the drawing, its legend and the Chrome trace download. */
export function timelineContent(data, namespace, name, width) {
  const status = h("span", { class: "download-status" });
  const button = h("button", { type: "button", id: "trace-download", class: "link",
    text: "Download Chrome trace", title: "For chrome://tracing or ui.perfetto.dev" });
  button.addEventListener("click", async () => {
    status.textContent = "";
    try {
      await download(jobPath(namespace, name, "timeline"), { format: "chrome" }, `${namespace}-${name}.trace.json`);
    } catch (error) {
      status.textContent = error.message;
    }
  });
  const failures = (data.marks || []).filter((mark) => mark.kind === "failure").length;
  const totals = goodputText(data.totals);
  return [h("div", { class: "timeline-wrap" }, drawTimeline(data, width)), legend(data),
    h("p", { class: "timeline-foot" }, h("span", { id: "timeline-failures", text: `${failures} failure(s)` }), " · ",
      totals ? [h("span", { id: "timeline-totals", text: `goodput ${totals}` }), " · "] : null, button, status),
    refusals(data)];
}

/** The node refusals, in words (a pod a node would not admit: created again alone, no failure counted). */
function refusals(data) {
  const refused = (data.marks || []).filter((mark) => mark.kind === "refused");
  if (!refused.length) return null;
  return h("ul", { id: "timeline-refusals", class: "timeline-foot" },
    refused.map((mark) => h("li", { class: "mark-refused-text", text: mark.label })));
}
