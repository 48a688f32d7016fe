// The jobs table, refreshed in place every 2 s: rows update without a reload or a jump.
import { api } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, badge, duration, el, progressBar, queuePlace, setProgress, when } from "../ui.js";

const STATUSES = ["queued", "running", "paused", "succeeded", "failed", "cancelled"];

export function renderJobs(main, { user }) {
  const filter = el("select", { id: "status-filter" },
    el("option", { value: "" }, t("jobs.all")),
    STATUSES.map((s) => el("option", { value: s }, t(`status.${s}`))));
  filter.value = sessionStorage.getItem("qatune.jobs.filter") || "";
  const body = el("tbody");
  const holder = el("div", {}, el("p", { class: "loading" }, t("common.loading")));
  main.append(
    el("div", { class: "header-row" },
      el("h1", {}, t("jobs.title")),
      el("div", { class: "actions" },
        el("label", { for: "status-filter", class: "visually-hidden" }, t("jobs.filter")), filter,
        el("a", { class: "button", href: "#/new" }, t("nav.new")))),
    holder);
  const table = el("div", { class: "table-wrap" }, el("table", { id: "jobs-table" },
    el("colgroup", {}, el("col", { style: "width:6%" }), el("col", { style: "width:24%" }),
      el("col", { style: "width:12%" }), el("col", { style: "width:24%" }),
      el("col", { class: "hide-sm", style: "width:12%" }), user.is_admin ? el("col", { style: "width:9%" }) : null,
      el("col", { class: "hide-sm", style: "width:15%" })),
    el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, t("common.name")), el("th", {}, t("jobs.status")),
      el("th", {}, t("jobs.progress")), el("th", { class: "hide-sm" }, t("jobs.device")),
      user.is_admin ? el("th", {}, t("common.owner")) : null,
      el("th", { class: "hide-sm" }, t("common.created")))),
    body));
  const rows = new Map();
  let timer;

  function row(job) {
    const bar = progressBar(job.progress.percent);
    const label = el("div", { class: "progress-label" });
    const tr = el("tr", { class: "clickable", tabindex: "0", "data-job": job.id,
      onclick: () => { location.hash = `#/jobs/${job.id}`; },
      onkeydown: (e) => { if (e.key === "Enter") location.hash = `#/jobs/${job.id}`; } },
      el("td", { class: "num" }, job.id), el("td", { title: job.name }, job.name), el("td"),
      el("td", {}, bar, label), el("td", { class: "hide-sm" }),
      user.is_admin ? el("td", {}, job.owner) : null,
      el("td", { class: "hide-sm" }, when(job.created_at)));
    return { tr, bar, label };
  }

  function update(entry, job) {
    const cells = entry.tr.children;
    cells[2].replaceChildren(badge(job.status));
    setProgress(entry.bar, job.progress.percent);
    const p = job.progress;
    entry.label.textContent = job.status === "running"
      ? `${p.percent.toFixed(0)}% · ${t("eta", { eta: duration(p.eta_seconds) })}`
      : job.status === "succeeded" ? when(job.finished_at) : queuePlace(job);
    cells[4].textContent = job.device ? `${job.device} · ${job.dtype}` : t("common.none");
  }

  async function refresh() {
    try {
      const query = filter.value ? `?status=${filter.value}&limit=200` : "?limit=200";
      const page = await api(`/jobs${query}`);
      if (!page.items.length) {
        holder.replaceChildren(el("div", { class: "panel empty" }, t("jobs.empty")));
        rows.clear();
      } else {
        if (!holder.contains(table)) holder.replaceChildren(table);
        const seen = new Set();
        page.items.forEach((job, index) => {
          seen.add(job.id);
          let entry = rows.get(job.id);
          if (!entry) { entry = row(job); rows.set(job.id, entry); }
          if (body.children[index] !== entry.tr) body.insertBefore(entry.tr, body.children[index] || null);
          update(entry, job);
        });
        for (const [id, entry] of rows) if (!seen.has(id)) { entry.tr.remove(); rows.delete(id); }
      }
    } catch (error) {
      if (error.status !== 401) holder.replaceChildren(alertBox(error.message));
    }
    timer = setTimeout(refresh, 2000);
  }
  filter.addEventListener("change", () => {
    sessionStorage.setItem("qatune.jobs.filter", filter.value);
    clearTimeout(timer);
    refresh();
  });
  refresh();
  return () => clearTimeout(timer);
}
