// The job page: the job (GET .../trainingjobs/NAME), what the caller may do to it (GET .../access), its curves,
// timeline, last failure, pods, checkpoints, conditions and events, logs; kept current by GET .../watch.

import { ApiError, follow, getJson, jobPath, request } from "./api.js";
import { metricCharts, trainingCharts } from "./charts.js";
import { h, message, panel, phaseBadge, replace, throttle } from "./dom.js";
import { checkpoints, facts, failure, history, isFinished, pods } from "./jobparts.js";
import { logsPanel } from "./logs.js";
import { timelineContent } from "./timeline.js";

const NO_ACCESS = { get: false, patch: false, delete: false, logs: false, events: false, pods: false };
const PANELS = [["facts", "Status"], ["curves", "Training curves"], ["timeline", "Timeline"],
  ["failure", "Last failure"], ["pods", "Pods"], ["checkpoints", "Checkpoints"],
  ["history", "Conditions and events"], ["logs", "Logs"]];

function actionButton(id, text, enabled, why, act) {
  const title = enabled ? text : why;
  const button = h("button", { type: "button", id, class: "action", text, disabled: !enabled, title });
  button.addEventListener("click", act);
  return button;
}

/** An answer, or what `fallback` makes of its error message (an aborted page still throws). */
async function optional(load, fallback) {
  try {
    return await load();
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return fallback(error instanceof ApiError ? error.message : String(error));
  }
}

class JobPage {
  constructor(root, namespace, name) {
    Object.assign(this, { root, namespace, name, job: null, access: NO_ACCESS, deleted: false, armed: null });
    this.events = [];
    this.stop = new AbortController();
    this.stopLogs = () => {};
    this.phase = h("span", { id: "job-phase-badge" });
    this.live = h("span", { class: "live", id: "job-live", text: "connecting" });
    this.actions = h("div", { class: "actions", id: "job-actions" });
    this.notice = h("div", { id: "job-notice" });
    this.parts = Object.fromEntries(PANELS.map(([key, title]) => [key, panel(title, `panel-${key}`)]));
    this.refreshSoon = throttle(() => this.refreshDetails().catch(() => {}), 2000);
    const title = h("h1", {}, h("a", { href: "#/jobs", text: "Jobs" }), ` / ${namespace} / `,
      h("span", { id: "job-name", text: name }));
    replace(root, h("div", { class: "toolbar" }, title, this.phase, this.live, this.actions), this.notice,
      h("div", { class: "job-grid" }, Object.values(this.parts)));
  }

  body(key) {
    return this.parts[key].querySelector(".body");
  }

  path(rest = "") {
    return jobPath(this.namespace, this.name, rest);
  }

  async act(verb) {
    replace(this.notice);
    try {
      if (verb === "delete") await request(this.path(), { method: "DELETE", signal: this.stop.signal });
      else await request(this.path(verb), { method: "POST", signal: this.stop.signal });
      const done = verb === "delete" ? "Deleting…" : `${verb[0].toUpperCase()}${verb.slice(1)} requested.`;
      replace(this.notice, message("info", done));
    } catch (error) {
      if (error.name !== "AbortError") replace(this.notice, message("error", error.message));
    }
  }

  /** Delete takes a second click within 5 seconds. */
  confirmDelete(button) {
    if (this.armed) {
      clearTimeout(this.armed);
      this.armed = null;
      this.act("delete");
      return;
    }
    button.textContent = "Really delete?";
    button.classList.add("armed");
    this.armed = setTimeout(() => { this.armed = null; this.drawActions(); }, 5000);
  }

  drawActions() {
    const suspended = Boolean(((this.job.spec || {}).runPolicy || {}).suspend);
    const finished = isFinished(this.job);
    const where = `in namespace ${this.namespace}`;
    const gone = this.deleted ? "The job was deleted" : "";
    const patchWhy = gone || (this.access.patch ? "" : `You may not patch trainingjobs ${where}`);
    const deleteWhy = gone || (this.access.delete ? "" : `You may not delete trainingjobs ${where}`);
    const suspendWhy = patchWhy || (finished ? "The job has finished" : "The job is suspended already");
    replace(this.actions,
      actionButton("action-suspend", "Suspend", !patchWhy && !suspended && !finished, suspendWhy,
        () => this.act("suspend")),
      actionButton("action-resume", "Resume", !patchWhy && suspended, patchWhy || "The job is not suspended",
        () => this.act("resume")),
      actionButton("action-delete", "Delete", !deleteWhy, deleteWhy, (event) => this.confirmDelete(event.target)));
  }

  drawStatus() {
    const status = this.job.status || {};
    replace(this.phase, phaseBadge(status.phase));
    replace(this.body("facts"), facts(this.job));
    replace(this.body("curves"), h("div", { class: "charts" }, trainingCharts(status)),
      h("div", { class: "charts small" }, metricCharts(status)));
    replace(this.body("checkpoints"), checkpoints(this.job));
    this.drawHistory();
    if (!this.armed) this.drawActions();
  }

  /** The job's conditions (current) with the events last read. */
  drawHistory() {
    const why = "Events need list events in this namespace.";
    const note = this.access.events ? null : h("p", { class: "muted", text: why });
    replace(this.body("history"), history(this.job, this.events), note);
  }

  /** Events, pods, timeline and the failure's log tail: each read only when the caller may, each may fail alone. */
  async refreshDetails() {
    const { access } = this;
    const signal = this.stop.signal;
    const last = (this.job.status || {}).lastFailure;
    const [events, podList, timeline, failed] = await Promise.all([
      access.events ? optional(async () => (await getJson(this.path("events"), { signal })).items, () => []) : [],
      access.pods ? optional(async () => (await getJson(this.path("pods"), { signal })).items, (m) => m)
        : "Listing pods needs list pods in this namespace.",
      optional(() => getJson(this.path("timeline"), { signal }), (m) => m),
      access.logs && last
        ? optional(async () => (await getJson(this.path("failure"), { signal })).lastFailure, () => null) : null,
    ]);
    if (signal.aborted) return;
    this.events = events;
    this.drawHistory();
    replace(this.body("pods"), typeof podList === "string" ? message("info", podList) : pods(podList));
    const width = Math.max(600, (this.parts.timeline.clientWidth || 960) - 32);
    replace(this.body("timeline"), typeof timeline === "string" ? message("info", timeline)
      : timelineContent(timeline, this.namespace, this.name, width));
    replace(this.body("failure"), failure(last, failed, access.logs));
  }

  changed(kind, data) {
    if (kind === "deleted") {
      this.deleted = true;
      replace(this.notice, message("info", "This job was deleted."));
      this.drawActions();
      this.stop.abort();
      this.live.textContent = "deleted";
      return;
    }
    const first = this.job === null;
    this.job = data;
    this.drawStatus();
    if (first) this.stopLogs = logsPanel(this.body("logs"), data, this.access.logs, this.namespace, this.name);
    this.refreshSoon();
  }

  async start() {
    const signal = this.stop.signal;
    try {
      const [found, allowed] = await Promise.all([getJson(this.path(), { signal }),
        optional(() => getJson(this.path("access"), { signal }), () => NO_ACCESS)]);
      this.access = { ...NO_ACCESS, ...allowed };
      this.changed("status", found);
    } catch (error) {
      if (error.name !== "AbortError") replace(this.root, message("error", error.message));
      return;
    }
    follow(this.path("watch"), {
      signal, onEvent: (kind, data) => this.changed(kind, data),
      onState: (state, error) => {
        if (this.deleted) return;
        this.live.textContent = state;
        this.live.className = `live ${state}`;
        if (error) this.live.title = error.message;
      },
    });
  }

  close() {
    this.stop.abort();
    this.stopLogs();
    this.refreshSoon.cancel();
    clearTimeout(this.armed);
  }
}

/** The job page in `root`; returns the function that stops its streams. */
export function jobView(root, namespace, name) {
  const page = new JobPage(root, namespace, name);
  page.start();
  return () => page.close();
}
