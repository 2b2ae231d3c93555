// The parts of the job page drawn from data: its facts, conditions and events in time order, the last failure,
// the pods and the checkpoints.

import { age, clock, h, num, parseTime, phaseBadge, progressBar, until } from "./dom.js";
import { goodputView } from "./goodput.js";

const FINISHED = new Set(["Succeeded", "Failed"]);

export function isFinished(job) {
  return FINISHED.has((job.status || {}).phase);
}

function table(id, columns, rows, empty) {
  if (!rows.length) return h("p", { class: "muted", id, text: empty });
  return h("div", { class: "table-wrap" }, h("table", { id },
    h("thead", {}, h("tr", {}, columns.map((title) => h("th", { text: title })))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => (cell instanceof Node ? h("td", {}, cell)
      : h("td", { text: cell ?? "" }))))))));
}

function fact(label, id, ...value) {
  return [h("dt", { text: label }), h("dd", { id }, ...value)];
}

function replicas(spec) {
  const workers = (spec.workers || {}).replicas ?? 0;
  const servers = (spec.parameterServers || {}).replicas;
  const ps = servers ? `, ${servers} parameter servers` : "";
  return `${spec.mode || "DDP"}, ${workers} worker${workers === 1 ? "" : "s"}${ps}`;
}

/** Phase, attempt, restarts, progress, loss, throughput, goodput, times, checkpoint and its pacing, result. */
export function facts(job) {
  const status = job.status || {};
  const progress = status.progress || {};
  const restarts = status.restarts || {};
  const heard = progress.lastChangeTime || progress.lastHeartbeatTime; // the operator's clock when it says
  const steps = progress.totalSteps ? `${progress.step ?? 0} / ${progress.totalSteps}` : String(progress.step ?? "");
  const eta = isFinished(job) ? "" : until(progress.estimatedCompletionTime);
  const result = status.result;
  return h("dl", { class: "facts", id: "job-facts" },
    fact("Phase", "job-phase", phaseBadge(status.phase)),
    fact("Attempt", "job-attempt", String(status.attempt ?? "")),
    fact("Restarts", "job-restarts", Object.entries({ retryable: 0, oom: 0, disruption: 0, stalled: 0, ...restarts })
      .map(([key, count]) => `${key} ${count}`).join(" · ")),
    fact("Progress", "job-progress", progressBar(progress.percent),
      eta ? h("span", { class: "eta", text: ` ETA ${eta}` }) : null),
    fact("Step", "job-step", steps),
    fact("Loss", "job-loss", num(progress.loss)),
    fact("Samples/s", "job-throughput", num(progress.samplesPerSecond)),
    fact("Heartbeat", "job-heartbeat", heard ? `${age(heard)} ago` : ""),
    fact("Goodput", "job-goodput-fact", goodputView(status.goodput, "job-goodput")),
    fact("Shape", "job-shape", replicas(job.spec || {})),
    fact("Created", "job-created", clock((job.metadata || {}).creationTimestamp)),
    fact("Started", "job-started", clock(status.startTime)),
    fact("Completed", "job-completed", clock(status.completionTime)),
    fact("Checkpoint", "job-checkpoint", status.lastCheckpoint
      ? `step ${status.lastCheckpoint.step ?? "?"} ${status.lastCheckpoint.path || ""}` : ""),
    fact("Checkpoint pacing", "job-pacing", (progress.checkpointPacing || {}).reason || ""),
    result ? fact("Result", "job-result", `step ${result.step ?? "?"}, loss ${num(result.loss)}${result.metrics
      ? `, ${Object.entries(result.metrics).map(([k, v]) => `${k} ${num(v)}`).join(", ")}` : ""}`) : null);
}

/** Conditions and events in one list, oldest first. */
export function history(job, events) {
  const entries = [
    ...((job.status || {}).conditions || []).map((c) => ({
      time: c.lastTransitionTime, what: `condition ${c.type}=${c.status}`, reason: c.reason, message: c.message,
      kind: "condition",
    })),
    ...(events || []).map((e) => ({
      time: e.lastTimestamp || e.firstTimestamp,
      what: `${e.type || "Normal"} event${e.count > 1 ? ` ×${e.count}` : ""}`,
      reason: e.reason, message: e.message, kind: e.type === "Warning" ? "warning" : "event",
    })),
  ];
  entries.sort((a, b) => (parseTime(a.time) ?? 0) - (parseTime(b.time) ?? 0));
  return table("job-history", ["Time", "What", "Reason", "Message"],
    entries.map((e) => [h("span", { title: e.time || "", text: clock(e.time) }),
      h("span", { class: `kind-${e.kind}`, text: e.what }), e.reason, e.message]), "No conditions or events yet.");
}

/** The last failure; its log tail when the caller may read logs (GET .../failure). */
export function failure(last, detailed, mayReadLogs) {
  if (!last) return h("p", { class: "muted", id: "job-failure", text: "No failure." });
  const tail = (detailed || {}).logTail;
  const cls = String(last.failureClass || "").toLowerCase().replace(/[^a-z0-9-]/g, "");
  const noTail = mayReadLogs ? "No log tail was kept."
    : "The log tail needs the right to read pod logs (get pods/log).";
  return h("div", { id: "job-failure" },
    h("p", {}, h("span", { class: `failure-class fc-${cls}`, text: last.failureClass || "?" }),
      ` pod ${last.pod || "?"} (attempt ${last.attempt ?? "?"})`,
      last.exitCode !== undefined && last.exitCode !== null ? `, exit code ${last.exitCode}` : "",
      last.reason ? `, ${last.reason}` : "", last.time ? ` at ${clock(last.time)}` : ""),
    last.message ? h("p", { class: "failure-message", text: last.message }) : null,
    last.consequences ? h("p", { class: "failure-consequences", id: "failure-consequences",
      text: `As a consequence, ${last.consequences}.` }) : null,
    tail ? h("pre", { class: "log", id: "failure-log", text: tail })
      : h("p", { class: "muted", text: noTail }));
}

function ended(pod) {
  const code = pod.exitCode !== null && pod.exitCode !== undefined ? `exit ${pod.exitCode}` : "";
  return [pod.reason, code].filter(Boolean).join(", ");
}

export function pods(list) {
  return table("job-pods", ["Pod", "Replica", "Attempt", "Phase", "Ready", "Node", "Started", "Restarts", "Ended"],
    (list || []).map((p) => [p.name, `${p.role}-${p.index}`, p.attempt, p.phase, p.ready ? "yes" : "no", p.node,
      age(p.started) ? `${age(p.started)} ago` : "", p.restarts,
      ended(p)]),
    "No pods.");
}

/** The checkpoints still on the volume, newest first: those the trainer last said checkpoint.keep left
 * (status.lastCheckpoint.kept), else the newest `keep` of those the history saw. */
export function existing(job) {
  const status = job.status || {};
  const seen = [...((status.history || {}).checkpoints || [])].reverse();
  const kept = (status.lastCheckpoint || {}).kept;
  if (Array.isArray(kept)) return seen.filter((c) => kept.includes(c.step));
  return seen.slice(0, ((job.spec || {}).checkpoint || {}).keep ?? 3);
}

export function checkpoints(job) {
  const list = existing(job);
  return table("job-checkpoints", ["Step", "Path", "Time"],
    list.map((c) => [c.step, c.path, h("span", { title: c.time || "", text: clock(c.time) })]), "No checkpoints yet.");
}
