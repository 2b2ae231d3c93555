// The logs panel: one replica's log (GET .../logs?replica=...), followed as it grows by reading the streamed answer.

import { ApiError, chunks, jobPath, request } from "./api.js";
import { h, message, replace } from "./dom.js";

const KEEP_CHARS = 512 * 1024;

function replicaNames(job) {
  const spec = job.spec || {};
  const names = [];
  for (let i = 0; i < ((spec.workers || {}).replicas || 0); i += 1) names.push(`worker-${i}`);
  for (let i = 0; i < ((spec.parameterServers || {}).replicas || 0); i += 1) names.push(`ps-${i}`);
  return names.length ? names : ["worker-0"];
}

/**
 * The logs panel of `job` in `root`; `allowed` says whether the caller may read pod logs. Returns the function
 * that stops a followed log.
 */
export function logsPanel(root, job, allowed, namespace, name) {
  if (!allowed) {
    const why = "Reading logs needs get pods/log in this namespace.";
    replace(root, h("p", { class: "muted", id: "logs-denied", text: why }));
    return () => {};
  }
  let reading = null;
  const replica = h("select", { id: "logs-replica" }, replicaNames(job).map((r) => h("option", { value: r, text: r })));
  const followBox = h("input", { type: "checkbox", id: "logs-follow", checked: true });
  const show = h("button", { type: "button", id: "logs-show", text: "Show" });
  const stopButton = h("button", { type: "button", id: "logs-stop", text: "Stop", disabled: true });
  const state = h("span", { class: "logs-state", id: "logs-state" });
  const output = h("pre", { class: "log", id: "logs-output" });

  function stop() {
    reading?.abort();
    reading = null;
    stopButton.disabled = true;
  }

  async function read() {
    stop();
    const mine = new AbortController();
    reading = mine;
    output.textContent = "";
    stopButton.disabled = !followBox.checked;
    state.textContent = "loading";
    const query = { replica: replica.value, tailLines: 1000, follow: followBox.checked ? "true" : "" };
    try {
      const response = await request(jobPath(namespace, name, "logs"), { query, signal: mine.signal });
      state.textContent = followBox.checked ? "following" : "";
      for await (const text of chunks(response)) {
        const stuck = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
        output.append(text);
        if (output.textContent.length > KEEP_CHARS) output.textContent = output.textContent.slice(-KEEP_CHARS / 2);
        if (stuck) output.scrollTop = output.scrollHeight;
      }
      state.textContent = mine.signal.aborted ? "stopped" : "ended";
    } catch (error) {
      if (error.name === "AbortError") state.textContent = "stopped";
      else replace(state, message("error", error instanceof ApiError ? error.message : String(error)));
    } finally {
      if (reading === mine) stop();
    }
  }

  show.addEventListener("click", read);
  stopButton.addEventListener("click", stop);
  replace(root, h("div", { class: "logs-controls" }, h("label", { for: "logs-replica", text: "Replica " }), replica,
    h("label", { class: "check" }, followBox, " follow"), show, stopButton, state), output);
  return stop;
}
