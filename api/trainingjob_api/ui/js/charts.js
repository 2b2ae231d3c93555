// Line charts drawn as SVG: the loss curve, throughput and each evaluation metric over training steps.

import { h, num, s } from "./dom.js";

const MARGIN = { left: 56, right: 14, top: 10, bottom: 30 };

/** About `count` round numbers covering [min, max]. */
export function ticks(min, max, count = 5) {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((candidate) => candidate >= raw) || 10 * power;
  const found = [];
  for (let value = Math.ceil(min / step) * step; value <= max + step * 1e-9; value += step) {
    found.push(Number(value.toPrecision(12)));
  }
  return found;
}

function extent(values) {
  let low = Math.min(...values);
  let high = Math.max(...values);
  if (low === high) {
    const pad = Math.abs(low) * 0.1 || 1;
    low -= pad;
    high += pad;
  }
  return [low, high];
}

/**
 * A chart of `series` ([{name, points: [[x, y], ...]}]) against steps; points that are not finite numbers are left
 * out. Returns a <figure> (with a note instead when there is nothing to draw).
 */
export function lineChart({ title, series, id, width = 560, height = 220, xLabel = "step" }) {
  const clean = series.map((line, index) => ({
    ...line,
    index: line.tone ?? index,
    points: line.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)),
  })).filter((line) => line.points.length);
  const figure = h("figure", { class: "chart", id }, h("figcaption", { text: title }));
  if (!clean.length) {
    figure.append(h("p", { class: "muted", text: "No points yet." }));
    return figure;
  }
  const all = clean.flatMap((line) => line.points);
  const [x0, x1] = extent(all.map(([x]) => x));
  const [y0, y1] = extent(all.map(([, y]) => y));
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const x = (value) => MARGIN.left + ((value - x0) / (x1 - x0)) * plotW;
  const y = (value) => MARGIN.top + plotH - ((value - y0) / (y1 - y0)) * plotH;
  const grid = [
    ...ticks(y0, y1, 4).map((value) => [
      s("line", { class: "grid", x1: MARGIN.left, x2: width - MARGIN.right, y1: y(value), y2: y(value) }),
      s("text", { class: "tick", x: MARGIN.left - 6, y: y(value) + 4, "text-anchor": "end", text: num(value) }),
    ]),
    ...ticks(x0, x1, 6).map((value) => [
      s("line", { class: "grid", x1: x(value), x2: x(value), y1: MARGIN.top, y2: MARGIN.top + plotH }),
      s("text", { class: "tick", x: x(value), y: height - 12, "text-anchor": "middle", text: num(value) }),
    ]),
  ];
  const lines = clean.map((line) => {
    const [lastX, lastY] = line.points[line.points.length - 1];
    return s("g", { class: `series series-${line.index % 6}`, "data-name": line.name },
      s("polyline", { points: line.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ") }),
      s("circle", { cx: x(lastX), cy: y(lastY), r: 3 },
        s("title", { text: `${line.name} ${num(lastY)} at ${xLabel} ${lastX}` })));
  });
  figure.append(
    s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title }, grid,
      s("text", { class: "axis-label", x: width - MARGIN.right, y: height - 1, "text-anchor": "end", text: xLabel }),
      lines),
    h("ul", { class: "legend" }, clean.map((line) => h("li", { class: `series-${line.index % 6}` },
      h("span", { class: "swatch" }), `${line.name}: ${num(line.points[line.points.length - 1][1])}`))));
  return figure;
}

/** The loss curve and throughput from status.history.points plus the current progress as the newest point. */
export function trainingCharts(status) {
  const history = status.history || {};
  const points = [...(history.points || [])];
  const progress = status.progress;
  if (progress && Number.isFinite(progress.step) && !points.some((p) => p.step === progress.step)) {
    points.push({ step: progress.step, loss: progress.loss, samplesPerSecond: progress.samplesPerSecond });
  }
  points.sort((a, b) => a.step - b.step);
  return [
    lineChart({ title: "Loss", id: "chart-loss",
      series: [{ name: "loss", points: points.map((p) => [p.step, p.loss]) }] }),
    lineChart({ title: "Samples per second", id: "chart-throughput",
      series: [{ name: "samples/s", tone: 1, points: points.map((p) => [p.step, p.samplesPerSecond]) }] }),
  ];
}

/** One chart per evaluation metric (status.history.evaluations plus progress.metrics at progress.metricsStep). */
export function metricCharts(status) {
  const evaluations = [...((status.history || {}).evaluations || [])];
  const progress = status.progress || {};
  if (progress.metrics && Number.isFinite(progress.metricsStep)
      && !evaluations.some((e) => e.step === progress.metricsStep)) {
    evaluations.push({ step: progress.metricsStep, metrics: progress.metrics });
  }
  evaluations.sort((a, b) => a.step - b.step);
  const names = [...new Set(evaluations.flatMap((e) => Object.keys(e.metrics || {})))].sort().slice(0, 12);
  return names.map((name, index) => lineChart({
    title: name, id: `chart-metric-${index}`, width: 360, height: 180,
    series: [{ name, tone: 2 + (index % 4), points: evaluations.map((e) => [e.step, (e.metrics || {})[name]]) }],
  }));
}
