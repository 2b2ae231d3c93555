// Where a job's time went (status.goodput, or a timeline's totals): one line as tjctl says it, and a bar of its parts.

import { h, s, seconds } from "./dom.js";

const PARTS = [["queued", "queued"], ["startup", "startup"], ["productive", "productive"],
  ["checkpointStall", "checkpoint stall"], ["recovery", "recovery"], ["redone", "redone"], ["shrunk", "shrunk"],
  ["suspended", "suspended"]];
const BAR_W = 240;

/** The parts that had any time, in order: {key, label, value (seconds)}. */
function parts(split) {
  return PARTS.map(([key, label]) => ({ key, label, value: Number(split[`${key}Seconds`]) || 0 }))
    .filter((part) => part.value > 0);
}

/** "0.275 | 40s: queued 2s, startup 3s, productive 11s, recovery 12s, redone 12s"; "" without a split. */
export function goodputText(split) {
  if (!split || typeof split !== "object") return "";
  const ratio = typeof split.ratio === "number" ? String(split.ratio) : "unknown";
  const listed = parts(split).map((part) => `${part.label} ${seconds(part.value)}`).join(", ");
  return `${ratio} | ${seconds(Number(split.wallSeconds) || 0)}${listed ? `: ${listed}` : ""}`;
}

/** The line after a bar whose parts are as wide as their share of the time (each titled with its seconds). */
export function goodputView(split, id) {
  const text = goodputText(split);
  if (!text) return h("span", { id, class: "muted", text: "not yet" });
  const found = parts(split);
  const wall = found.reduce((sum, part) => sum + part.value, 0);
  let x = 0;
  const rects = found.map((part) => {
    const width = (part.value / wall) * BAR_W;
    const rect = s("rect", { class: `gp gp-${part.key.toLowerCase()}`, x, y: 0, width, height: 10 },
      s("title", { text: `${part.label}: ${seconds(part.value)}` }));
    x += width;
    return rect;
  });
  const bar = s("svg", { class: "goodput-bar", width: BAR_W, height: 10, viewBox: `0 0 ${BAR_W} 10`, role: "img",
    "aria-label": text }, rects);
  return h("span", { id }, bar, " ", text);
}
