// The router: #/path → a page module's render(main, params), which returns its cleanup.
import { api, session } from "./api.js";
import { getLang, setLang, t, translateStatic } from "./i18n.js";
import { renderDatasets } from "./pages/datasets.js";
import { renderEvalRun, renderEvals } from "./pages/evals.js";
import { renderJobDetail } from "./pages/job_detail.js";
import { renderJobs } from "./pages/jobs.js";
import { renderNewJob } from "./pages/new_job.js";
import { renderPlayground } from "./pages/playground.js";
import { renderSignIn } from "./pages/signin.js";
import { renderUsers } from "./pages/users.js";
import { renderAccount } from "./pages/account.js";

const routes = [
  [/^\/jobs\/(\d+)$/, renderJobDetail],
  [/^\/jobs$/, renderJobs],
  [/^\/new$/, renderNewJob],
  [/^\/datasets$/, renderDatasets],
  [/^\/evals\/(eval_\d+)\/runs\/(evalrun_\d+)(?:\/vs\/(evalrun_\d+))?$/, renderEvalRun],
  [/^\/evals$/, renderEvals],
  [/^\/playground$/, renderPlayground],
  [/^\/users$/, renderUsers],
  [/^\/account$/, renderAccount],
];

const main = document.getElementById("main");
const topbar = document.querySelector(".topbar");
let cleanup = () => {};
export const state = { user: null, expired: false };

async function loadUser() {
  if (!session.token) return null;
  try { return await api("/auth/me"); } catch { return null; }
}

async function route() {
  cleanup();
  cleanup = () => {};
  const path = location.hash.replace(/^#/, "") || "/jobs";
  if (!state.user) state.user = await loadUser();
  if (!state.user) {
    topbar.hidden = true;
    cleanup = renderSignIn(main, { expired: state.expired, onSignedIn: async () => {
      state.expired = false;
      state.user = await loadUser();
      if (location.hash === "#/signin" || !location.hash) location.hash = "#/jobs"; else route();
    } }) || (() => {});
    return;
  }
  topbar.hidden = false;
  document.getElementById("who").textContent = state.user.username;
  document.querySelector("[data-admin]").hidden = !state.user.is_admin;
  for (const link of topbar.querySelectorAll("nav a")) {
    const active = path.startsWith(link.getAttribute("href").slice(1));
    link.classList.toggle("active", active);
    if (active) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  for (const [pattern, render] of routes) {
    const match = path.match(pattern);
    if (match) {
      main.replaceChildren();
      cleanup = render(main, { params: match.slice(1), user: state.user }) || (() => {});
      return;
    }
  }
  location.hash = "#/jobs";
}

session.onExpired = () => {
  state.user = null;
  state.expired = true;
  route();
};

document.getElementById("signout").addEventListener("click", () => {
  session.token = null;
  state.user = null;
  location.hash = "#/signin";
  route();
});

const langSelect = document.getElementById("lang");
langSelect.value = getLang();
langSelect.addEventListener("change", () => { setLang(langSelect.value); route(); });
setLang(getLang());
translateStatic();
document.title = "qatune";
window.addEventListener("hashchange", route);
route();
export { t };
