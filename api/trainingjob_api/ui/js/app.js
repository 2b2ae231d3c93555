// The dashboard's entry: who the caller is (GET /whoami), the login form, and the routes of the hash
// (#/jobs, #/jobs/<namespace>/<name>, #/sweeps, #/sweeps/<namespace>/<name>, #/cluster). Each view returns a
// function that stops what it started.

import { ApiError, getJson, token } from "./api.js";
import { clusterView } from "./cluster.js";
import { h, message, replace } from "./dom.js";
import { jobView } from "./job.js";
import { jobsView } from "./jobs.js";
import { sweepsView, sweepView } from "./sweeps.js";

const view = document.getElementById("view");
const nav = document.getElementById("nav");
const username = document.getElementById("username");
const logoutButton = document.getElementById("logout");
let stopView = () => {};
let signedIn = false;

function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return "";
  }
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decoded);
  if (parts[0] === "jobs" && parts.length === 3) {
    return { name: "jobs", render: () => jobView(view, parts[1], parts[2]) };
  }
  if (parts[0] === "sweeps" && parts.length === 3) {
    return { name: "sweeps", render: () => sweepView(view, parts[1], parts[2]) };
  }
  if (parts[0] === "sweeps") return { name: "sweeps", render: () => sweepsView(view) };
  if (parts[0] === "cluster") return { name: "cluster", render: () => clusterView(view) };
  return { name: "jobs", render: () => jobsView(view) };
}

function show() {
  if (!signedIn) return;
  stopView();
  const current = route();
  for (const link of nav.querySelectorAll("a")) link.classList.toggle("active", link.dataset.view === current.name);
  view.replaceChildren();
  stopView = current.render() || (() => {});
}

function signedInAs(who) {
  signedIn = true;
  username.textContent = who.username || "";
  username.title = (who.groups || []).join(", ");
  nav.hidden = false;
  logoutButton.hidden = !token.get();
  show();
}

function loginForm(note) {
  signedIn = false;
  stopView();
  stopView = () => {};
  nav.hidden = true;
  logoutButton.hidden = true;
  username.textContent = "";
  const input = h("textarea", {
    id: "token", name: "token", rows: 4, autocomplete: "off", spellcheck: "false", required: true,
    placeholder: "eyJhbGciOi…",
  });
  const status = h("div", { id: "login-status" }, note ? message("error", note) : null);
  const form = h("form", { id: "login", class: "panel login" },
    h("h2", { text: "Sign in" }),
    h("p", {}, "Paste a Kubernetes token for this API, e.g. from ",
      h("code", { text: "kubectl create token NAME --audience trainingjob-api" }), ". It is kept in this tab only."),
    h("label", { for: "token", text: "Token" }), input, status,
    h("button", { type: "submit", id: "login-submit", text: "Sign in" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const candidate = input.value.trim();
    replace(status, message("info", "Checking…"));
    try {
      const who = await getJson("whoami", { bearer: candidate });
      token.set(candidate);
      signedInAs(who);
    } catch (error) {
      replace(status, message("error", error instanceof ApiError ? error.message : String(error)));
    }
  });
  replace(view, form);
  input.focus();
}

async function start() {
  try {
    signedInAs(await getJson("whoami"));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      const note = token.get() ? "Your token was not accepted (expired?): sign in again." : "";
      token.clear();
      loginForm(note);
    } else {
      replace(view, message("error", `The API cannot say who you are: ${error.message}`));
    }
  }
}

logoutButton.addEventListener("click", () => {
  token.clear();
  loginForm("");
});
window.addEventListener("hashchange", show);
window.addEventListener("tj-unauthorized", () => {
  if (signedIn) {
    token.clear();
    loginForm("Your token is no longer accepted: sign in again.");
  }
});
start();
