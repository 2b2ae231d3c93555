// The sweeps: every sweep the caller may see (GET /trainingsweeps), and one sweep's page (its trials ranked by the
// objective, and the objective plotted against a parameter). Both refresh every few seconds.

import { getJson } from "./api.js";
import { ticks } from "./charts.js";
import { h, message, num, phaseBadge, replace, s } from "./dom.js";
import { jobLink } from "./jobs.js";

const REFRESH_MS = 5000;
const PLOT = { width: 560, height: 260, left: 56, right: 14, top: 10, bottom: 34 };

export function sweepLink(namespace, name) {
  return `#/sweeps/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

function sweepPath(namespace, name) {
  return `namespaces/${encodeURIComponent(namespace)}/trainingsweeps/${encodeURIComponent(name)}`;
}

function trialBadge(phase) {
  return h("span", { class: `phase trial-${String(phase || "pending").toLowerCase()}`, text: phase || "Pending" });
}

/** Load `path` now and every few seconds into `content`, drawn by `draw`; returns the function that stops it. */
function refreshing(content, stamp, path, draw) {
  const stop = new AbortController();
  let timer = null;
  async function load() {
    try {
      draw(await getJson(path, { signal: stop.signal }));
      stamp.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      if (error.name === "AbortError") return;
      replace(content, message("error", error.message));
    }
    if (!stop.signal.aborted) timer = setTimeout(load, REFRESH_MS);
  }
  load();
  return () => { stop.abort(); clearTimeout(timer); };
}

function bestText(sweep) {
  const best = sweep.status?.bestTrial;
  return best ? `${sweep.spec.objective.metric} ${num(best.objective)} (trial ${best.number})` : "";
}

/** Every sweep the caller may see, in `root`. */
export function sweepsView(root) {
  const content = h("div", { id: "sweeps" });
  const stamp = h("span", { class: "live", id: "sweeps-updated" });
  replace(root, h("div", { class: "toolbar" }, h("h1", { text: "Sweeps" }), stamp), content);
  return refreshing(content, stamp, "trainingsweeps", (found) => {
    const items = found.items || [];
    if (!items.length) return replace(content, h("p", { class: "muted", text: "No sweeps you may see." }));
    const columns = ["Sweep", "Phase", "Trials", "Running", "Succeeded", "Pruned", "Failed", "Best"];
    return replace(content, h("div", { class: "table-wrap" }, h("table", { id: "sweeps-table" },
      h("thead", {}, h("tr", {}, columns.map((t) => h("th", { text: t })))),
      h("tbody", {}, items.map((sweep) => {
        const { namespace, name } = sweep.metadata;
        const counts = sweep.status?.counts || {};
        return h("tr", { "data-sweep": `${namespace}/${name}` },
          h("td", {}, h("a", { href: sweepLink(namespace, name), text: `${namespace}/${name}` })),
          h("td", {}, phaseBadge(sweep.status?.phase || "Pending")),
          h("td", { text: `${started(counts)}/${sweep.spec.maxTrials}` }),
          ["running", "succeeded", "pruned", "failed"].map((key) => h("td", { text: String(counts[key] || 0) })),
          h("td", { text: bestText(sweep) }));
      })))));
  });
}

/** Every trial started: the status's counts take in the older finished trials it no longer lists. */
export function started(counts) {
  return ["pending", "running", "succeeded", "failed", "pruned"].reduce((sum, key) => sum + (counts[key] || 0), 0);
}

/** The trials, best first: those with an objective by it, whatever their phase (shown beside), then the rest. */
export function ranked(trials, goal) {
  const sign = goal === "Maximize" ? -1 : 1;
  const key = (t) => [typeof t.objective === "number" ? sign * t.objective : Infinity, t.number];
  return [...trials].sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0] - y[0] || x[1] - y[1];
  });
}

function trialsTable(sweep, namespace) {
  const names = sweep.spec.parameters.map((p) => p.name);
  const metric = sweep.spec.objective.metric;
  return h("div", { class: "table-wrap" }, h("table", { id: "sweep-trials" },
    h("thead", {}, h("tr", {}, ["Trial", "Phase", metric, "Step", ...names, "Job", "Why"].map((t) => h("th", { text: t })))),
    h("tbody", {}, ranked(sweep.status?.trials || [], sweep.spec.objective.goal).map((t) => h("tr",
      { "data-trial": t.number },
      h("td", { text: String(t.number) }), h("td", {}, trialBadge(t.phase)), h("td", { text: num(t.objective) }),
      h("td", { text: t.objectiveStep ?? "" }),
      names.map((n) => h("td", { text: typeof t.parameters[n] === "number" ? num(t.parameters[n]) : String(t.parameters[n] ?? "") })),
      h("td", {}, h("a", { href: jobLink(namespace, t.jobName), text: t.jobName })),
      h("td", { class: "muted", text: t.phase === "Succeeded" ? "" : t.message || t.reason || "" }))))));
}

/** Where a parameter's values go on the x axis: a log or linear scale for numbers, evenly spaced categories. */
function axis(parameter) {
  if (parameter.type === "Categorical") {
    const labels = (parameter.values || []).map(String);
    const at = (v) => (labels.includes(String(v)) ? labels.indexOf(String(v)) : NaN);
    return { at, min: -0.5, max: labels.length - 0.5,
      ticks: labels.map((label, i) => [i, label]) };
  }
  const log = Boolean(parameter.log);
  const at = (v) => (log ? Math.log10(v) : v);
  const [min, max] = [at(parameter.min), at(parameter.max)];
  return { at, min, max, ticks: ticks(min, max, 5).map((t) => [t, log ? num(10 ** t) : num(t)]) };
}

/** The objective (y) of every trial that has one against `parameter` (x), a circle per trial by its phase. */
export function scatter(sweep, parameter) {
  const x = axis(parameter);
  const placed = (t) => Number.isFinite(x.at(t.parameters[parameter.name]));
  const trials = (sweep.status?.trials || []).filter((t) => typeof t.objective === "number" && placed(t));
  const values = trials.map((t) => t.objective);
  let [y0, y1] = values.length ? [Math.min(...values), Math.max(...values)] : [0, 1];
  if (y0 === y1) [y0, y1] = [y0 - 0.05, y1 + 0.05];
  const plotW = PLOT.width - PLOT.left - PLOT.right;
  const plotH = PLOT.height - PLOT.top - PLOT.bottom;
  const px = (v) => PLOT.left + ((v - x.min) / (x.max - x.min || 1)) * plotW;
  const py = (v) => PLOT.top + plotH - ((v - y0) / (y1 - y0)) * plotH;
  return s("svg", { id: "sweep-plot", class: "scatter", viewBox: `0 0 ${PLOT.width} ${PLOT.height}`, role: "img" },
    ticks(y0, y1, 4).map((v) => [
      s("line", { class: "grid", x1: PLOT.left, x2: PLOT.width - PLOT.right, y1: py(v), y2: py(v) }),
      s("text", { class: "tick", x: PLOT.left - 6, y: py(v) + 4, "text-anchor": "end", text: num(v) })]),
    x.ticks.map(([v, label]) => s("text",
      { class: "tick", x: px(v), y: PLOT.height - 16, "text-anchor": "middle", text: label })),
    s("text", { class: "axis-label", x: PLOT.left + plotW / 2, y: PLOT.height - 2, "text-anchor": "middle",
      text: parameter.name }),
    trials.map((t) => s("circle", {
      class: `pt trial-${t.phase.toLowerCase()}`, r: 5, cx: px(x.at(t.parameters[parameter.name])), cy: py(t.objective),
      "data-trial": t.number, "data-phase": t.phase,
    }, s("title", { text: `trial ${t.number} (${t.phase}): ${num(t.objective)}` }))));
}

/** One sweep's page in `root`. */
export function sweepView(root, namespace, name) {
  const content = h("div", { id: "sweep" });
  const stamp = h("span", { class: "live", id: "sweep-updated" });
  let chosen = null;
  replace(root, h("div", { class: "toolbar" }, h("h1", { text: `${namespace}/${name}` }), stamp), content);
  return refreshing(content, stamp, sweepPath(namespace, name), (sweep) => {
    const parameters = sweep.spec.parameters;
    const parameter = parameters.find((p) => p.name === chosen) || parameters[0];
    const counts = sweep.status?.counts || {};
    const begun = started(counts);
    const select = h("select", { id: "sweep-param", "aria-label": "parameter" },
      parameters.map((p) => h("option", { value: p.name, text: p.name, selected: p.name === parameter.name })));
    const plot = h("div", { class: "plot" }, scatter(sweep, parameter));
    select.addEventListener("change", () => {
      chosen = select.value;
      replace(plot, scatter(sweep, parameters.find((p) => p.name === chosen)));
    });
    const best = sweep.status?.bestTrial;
    replace(content,
      h("section", { class: "panel" },
        h("p", { id: "sweep-summary" }, h("span", { id: "sweep-phase" }, phaseBadge(sweep.status?.phase || "Pending")),
          ` ${begun} of ${sweep.spec.maxTrials} trials: ${counts.running || 0} running, ${counts.succeeded || 0}`
          + ` succeeded, ${counts.pruned || 0} pruned, ${counts.failed || 0} failed`),
        h("p", { id: "sweep-best" }, best ? `Best: ${bestText(sweep)} with ${Object.entries(best.parameters)
          .map(([k, v]) => `${k}=${typeof v === "number" ? num(v) : v}`).join(", ")}` : "No trial has succeeded yet.")),
      h("section", { class: "panel" }, h("h2", {}, `${sweep.spec.objective.metric} against `, select), plot),
      h("section", { class: "panel wide" }, h("h2", { text: "Trials, best first" }), trialsTable(sweep, namespace)));
  });
}
