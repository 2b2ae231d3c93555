// The jobs view: GET /jobsummaries filtered and paged, rows updated live from GET /jobsummaries/watch.

import { ApiError, follow, getJson } from "./api.js";
import { age, h, message, num, phaseBadge, progressBar, replace, throttle, until } from "./dom.js";

const PHASES = ["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"];
const RESTARTS = [["retryable", "R", "retryable failures"], ["oom", "O", "out of memory"],
  ["disruption", "D", "disruptions (evictions, lost nodes)"], ["stalled", "S", "stalled (no heartbeat)"]];
const filters = { namespace: "", phase: "", labelSelector: "", search: "", limit: 100 };
const seenNamespaces = new Set();

export function jobLink(namespace, name) {
  return `#/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

function restartChips(restarts = {}) {
  return RESTARTS.map(([key, letter, title]) => {
    const count = restarts[key] || 0;
    return h("span", { class: count ? "chip on" : "chip", title: `${count} ${title}`, text: `${letter}${count}` });
  });
}

function row(job) {
  const eta = job.completed ? "" : until(job.eta);
  return h("tr", { dataset: { key: `${job.namespace}/${job.name}`, phase: job.phase || "" } },
    h("td", { class: "ns", text: job.namespace }),
    h("td", { class: "name" }, h("a", { href: jobLink(job.namespace, job.name), text: job.name })),
    h("td", {}, phaseBadge(job.phase)),
    h("td", { class: "num", text: job.attempt ?? "" }),
    h("td", { class: "restarts" }, restartChips(job.restarts)),
    h("td", { class: "progress-cell" }, progressBar(job.percent),
      h("span", { class: "eta", title: job.eta || "", text: eta ? `ETA ${eta}` : "" })),
    h("td", { class: "num loss", text: num(job.loss) }),
    h("td", { class: "num", title: job.created || "", text: age(job.created) }));
}

function controls(reload) {
  const field = (key, attrs) => {
    const input = h("input", { id: `filter-${key}`, name: key, value: filters[key], ...attrs });
    input.addEventListener("input", throttle(() => { filters[key] = input.value.trim(); reload(); }, 400));
    return input;
  };
  const phase = h("select", { id: "filter-phase", name: "phase" }, h("option", { value: "", text: "any phase" }),
    PHASES.map((p) => h("option", { value: p, selected: filters.phase === p, text: p })));
  phase.addEventListener("change", () => { filters.phase = phase.value; reload(); });
  const size = h("select", { id: "page-size", title: "jobs per page" },
    [50, 100, 500].map((n) => h("option", { value: n, selected: filters.limit === n, text: `${n} per page` })));
  size.addEventListener("change", () => { filters.limit = Number(size.value); reload(); });
  return h("form", { class: "filters", onsubmit: (e) => e.preventDefault() },
    field("namespace", { placeholder: "namespace", list: "namespaces", autocomplete: "off" }),
    h("datalist", { id: "namespaces" }, [...seenNamespaces].sort().map((n) => h("option", { value: n }))),
    phase, field("labelSelector", { placeholder: "label selector, e.g. team=a" }),
    field("search", { placeholder: "name contains", type: "search" }), size);
}

function header() {
  return h("thead", {}, h("tr", {}, ["Namespace", "Name", "Phase", "Attempt", "Restarts", "Progress", "Loss", "Age"]
    .map((title) => h("th", { text: title }))));
}

/** The jobs view: a page of summaries, its counts and pager, kept current by the summaries' watch stream. */
class JobsPage {
  constructor(root) {
    this.stop = new AbortController();
    this.pages = [null];
    this.rows = new Map();
    this.summary = h("p", { class: "summary", id: "jobs-summary" });
    this.body = h("tbody", { id: "jobs-rows" });
    this.status = h("div", { id: "jobs-status" });
    this.pager = h("div", { class: "pager" });
    this.live = h("span", { class: "live", id: "jobs-live", text: "connecting" });
    this.reloadSoon = throttle(() => this.load(), 2000);
    const restart = () => { this.pages.length = 1; this.load(); };
    replace(root, h("div", { class: "toolbar" }, h("h1", { text: "Jobs" }), this.live), controls(restart),
      this.summary, this.status,
      h("div", { class: "table-wrap" }, h("table", { class: "jobs", id: "jobs" }, header(), this.body)), this.pager);
  }

  async load() {
    try {
      const page = await getJson("jobsummaries", {
        query: { ...filters, continue: this.pages[this.pages.length - 1] }, signal: this.stop.signal,
      });
      page.items.forEach((job) => seenNamespaces.add(job.namespace));
      this.rows = new Map(page.items.map((job) => [`${job.namespace}/${job.name}`, row(job)]));
      replace(this.body, [...this.rows.values()]);
      replace(this.status, page.items.length ? null : message("info", "No jobs you may see match."));
      this.showCounts(page);
      this.showPager(page.continue);
    } catch (error) {
      if (error.name === "AbortError") return;
      this.rows = new Map();
      replace(this.body);
      replace(this.summary);
      replace(this.status, message("error", error.message));
    }
  }

  showCounts(page) {
    const phases = Object.entries(page.phases || {}).filter(([, n]) => n).map(([p, n]) => `${n} ${p}`);
    const total = Number(page.total) || 0;
    replace(this.summary, `${total} job${total === 1 ? "" : "s"}`, phases.length ? ` · ${phases.join(", ")}` : "");
  }

  showPager(next) {
    const first = this.pages.length < 2;
    const back = h("button", { type: "button", id: "page-prev", disabled: first, text: "‹ Previous" });
    const more = h("button", { type: "button", id: "page-next", disabled: !next, text: "Next ›" });
    back.addEventListener("click", () => { this.pages.pop(); this.load(); });
    more.addEventListener("click", () => { this.pages.push(next); this.load(); });
    replace(this.pager, back, h("span", { text: `page ${this.pages.length}` }), more);
  }

  /** A summary changed: redraw its row in place, or reload the page when the change may move rows or counts. */
  changed(name, data) {
    const key = `${data.namespace}/${data.name}`;
    if (name === "deleted") {
      this.rows.get(key)?.remove();
      this.reloadSoon();
      return;
    }
    if (filters.namespace && data.namespace !== filters.namespace) return;
    if (filters.search && !String(data.name ?? "").includes(filters.search)) return;
    const shown = this.rows.get(key);
    if (!shown || (filters.phase && data.phase !== filters.phase)) {
      this.reloadSoon();
      return;
    }
    const fresh = row(data);
    shown.replaceWith(fresh);
    this.rows.set(key, fresh);
    if (shown.dataset.phase !== (data.phase || "")) this.reloadSoon(); // the counts per phase changed
  }

  start() {
    this.load();
    follow("jobsummaries/watch", {
      signal: this.stop.signal, onEvent: (name, data) => this.changed(name, data),
      onState: (state, error) => {
        this.live.textContent = state;
        this.live.className = `live ${state}`;
        if (error instanceof ApiError) this.live.title = error.message;
        if (state === "live") this.reloadSoon(); // what changed before the stream was up (or while it was down)
      },
    });
  }

  close() {
    this.stop.abort();
    this.reloadSoon.cancel();
  }
}

/** The jobs view in `root`; returns the function that stops its stream. */
export function jobsView(root) {
  const page = new JobsPage(root);
  page.start();
  return () => page.close();
}
