// The cluster view: GET /cluster every few seconds: GPUs requested by running, pending and suspended (queued) jobs,
// jobs per phase, recent failures.

import { getJson } from "./api.js";
import { age, h, message, replace, s } from "./dom.js";
import { jobLink } from "./jobs.js";

const REFRESH_MS = 5000;
const GPU_KINDS = [["running", "Running"], ["pending", "Pending"], ["suspended", "Suspended (queued)"]];
const PHASES = ["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"];

/** One horizontal bar per [label, count, class], scaled to the largest. */
function bars(id, entries) {
  const most = Math.max(1, ...entries.map(([, count]) => count));
  const width = 420;
  const rowH = 26;
  return s("svg", { class: "bars", id, viewBox: `0 0 ${width} ${entries.length * rowH}`, role: "img" },
    entries.map(([label, count, cls], i) => s("g",
      { class: `bar-row ${cls}`, "data-label": label, "data-count": count },
      s("text", { class: "bar-label", x: 0, y: i * rowH + 17, text: label }),
      s("rect", { class: "bar-value", x: 150, y: i * rowH + 5, height: 16,
        width: Math.max(count ? 2 : 0, (count / most) * 220) }),
      s("text", { class: "bar-count", x: 156 + (count / most) * 220, y: i * rowH + 17, text: String(count) }))));
}

function failures(list) {
  if (!list.length) return h("p", { class: "muted", id: "cluster-failures", text: "No recent failures." });
  return h("div", { class: "table-wrap" }, h("table", { id: "cluster-failures" },
    h("thead", {}, h("tr", {}, ["When", "Job", "Class", "Reason", "Pod"].map((t) => h("th", { text: t })))),
    h("tbody", {}, list.map((f) => h("tr", {},
      h("td", { title: f.time || "", text: `${age(f.time)} ago` }),
      h("td", {}, h("a", { href: jobLink(f.namespace, f.name), text: `${f.namespace}/${f.name}` })),
      h("td", { text: f.failureClass || "" }), h("td", { text: f.reason || "" }), h("td", { text: f.pod || "" }))))));
}

/** The cluster view in `root`; returns the function that stops its refreshing. */
export function clusterView(root) {
  const stop = new AbortController();
  let timer = null;
  const content = h("div", { id: "cluster" });
  const stamp = h("span", { class: "live", id: "cluster-updated" });

  async function load() {
    try {
      const found = await getJson("cluster", { signal: stop.signal });
      const gpus = found.gpus || {};
      const phases = found.phases || {};
      const total = GPU_KINDS.reduce((sum, [key]) => sum + (gpus[key] || 0), 0);
      replace(content,
        h("section", { class: "panel" }, h("h2", { text: `GPUs requested (${total})` }),
          bars("cluster-gpus", GPU_KINDS.map(([key, label]) => [label, gpus[key] || 0, `gpu-${key}`]))),
        h("section", { class: "panel" }, h("h2", { text: `Jobs per phase (${found.jobs ?? 0})` }),
          bars("cluster-phases", PHASES.map((p) => [p, phases[p] || 0, `phase-${p.toLowerCase()}`]))),
        h("section", { class: "panel wide" }, h("h2", { text: "Recent failures" }),
          failures(found.recentFailures || [])));
      stamp.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      if (error.name === "AbortError") return;
      replace(content, message("error", error.message));
    }
    if (!stop.signal.aborted) timer = setTimeout(load, REFRESH_MS);
  }

  replace(root, h("div", { class: "toolbar" }, h("h1", { text: "Cluster" }), stamp), content);
  load();
  return () => { stop.abort(); clearTimeout(timer); };
}
