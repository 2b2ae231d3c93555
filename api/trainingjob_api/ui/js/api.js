// Calls to the REST API: the caller's token on every request, errors as ApiError, and server-sent-event streams
// read with fetch() (EventSource cannot send an Authorization header), reconnected with backoff.

const TOKEN_KEY = "trainingjob.token";
const API_ROOT = new URL("../api/v1/", document.baseURI);

export class ApiError extends Error {
  constructor(status, reason, message) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** The URL of an API path (relative to /api/v1/), with the query's non-empty values. */
export function apiUrl(path, query = {}) {
  const url = new URL(path.replace(/^\//, ""), API_ROOT);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  return url;
}

export function jobPath(namespace, name, rest = "") {
  const base = `namespaces/${encodeURIComponent(namespace)}/trainingjobs/${encodeURIComponent(name)}`;
  return rest ? `${base}/${rest}` : base;
}

// The API refuses a POST, PUT, PATCH or DELETE without X-Requested-With (any value): no web form can send it.
function headers(bearer) {
  const found = { Accept: "application/json", "X-Requested-With": "trainingjob-dashboard" };
  if (bearer) found.Authorization = `Bearer ${bearer}`;
  return found;
}

async function problem(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    body = {};
  }
  const message = typeof body.message === "string" ? body.message : `HTTP ${response.status}`;
  const error = new ApiError(response.status, String(body.reason || response.statusText || ""), message);
  if (response.status === 401) window.dispatchEvent(new CustomEvent("tj-unauthorized", { detail: error }));
  return error;
}

/** fetch() an API path with the token; an ApiError unless the answer is 2xx. */
export async function request(path, { method = "GET", query = {}, signal, bearer = token.get() } = {}) {
  let response;
  try {
    response = await fetch(apiUrl(path, query), { method, headers: headers(bearer), signal, cache: "no-store" });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "Unreachable", "the API did not answer (network error)");
  }
  if (!response.ok) throw await problem(response);
  return response;
}

export async function getJson(path, options = {}) {
  return (await request(path, options)).json();
}

/** Yield the text of a streamed response chunk by chunk, until it ends or `signal` aborts. */
export async function* chunks(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield decoder.decode(value, { stream: true });
    }
  } finally {
    reader.releaseLock();
  }
}

/** A parser of the text/event-stream format: feed it text, it calls onEvent(name, data) per event. */
export class EventParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.name = "";
    this.data = [];
  }

  feed(text) {
    this.buffer += text;
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = lines.pop();
    for (const line of lines) this.line(line);
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.onEvent(this.name || "message", this.data.join("\n"));
      this.name = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.name = value;
    else if (field === "data") this.data.push(value);
  }
}

const FATAL = new Set([400, 401, 403, 404, 422]);

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/**
 * Follow an SSE endpoint until `signal` aborts: onEvent(name, parsedJson) per event, onState("live" | "retrying" |
 * "stopped", error?) as the connection comes and goes. Reconnects with backoff (1 s doubling to 30 s, jittered);
 * gives up on answers that a retry would not change (401, 403, 404, ...).
 */
export async function follow(path, { query = {}, signal, onEvent, onState = () => {} }) {
  let delay = 1000;
  while (!signal.aborted) {
    try {
      const response = await request(path, { query, signal, bearer: token.get() });
      onState("live");
      const parser = new EventParser((name, data) => {
        delay = 1000;
        let parsed;
        try {
          parsed = JSON.parse(data);
        } catch {
          return;
        }
        onEvent(name, parsed);
      });
      for await (const text of chunks(response)) parser.feed(text);
    } catch (error) {
      if (signal.aborted || error.name === "AbortError") break;
      if (error instanceof ApiError && FATAL.has(error.status)) {
        onState("stopped", error);
        return;
      }
    }
    if (signal.aborted) break;
    onState("retrying");
    await pause(delay * (0.75 + Math.random() / 2), signal);
    delay = Math.min(delay * 2, 30000);
  }
  onState("stopped");
}

/** Fetch an API path with the token and save the answer as a file. */
export async function download(path, query, filename) {
  const blob = await (await request(path, { query })).blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
