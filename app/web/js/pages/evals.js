// Evals: the list of evals and their runs, and a run's report (report_url): each item with
// what the model answered and every criterion's score, or two runs side by side.
import { api } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el, number, progressBar, when } from "../ui.js";

const UNFINISHED = ["queued", "in_progress"];

async function allPages(path) {
  const items = [];
  let after = null;
  for (;;) {
    const page = await api(`${path}${path.includes("?") ? "&" : "?"}limit=100${after ? `&after=${after}` : ""}`);
    items.push(...page.data);
    if (!page.has_more) return items;
    after = page.last_id;
  }
}

function runLink(run) {
  return el("a", { href: `#/evals/${run.eval_id}/runs/${run.id}` }, run.name);
}

function runBadge(status) {
  return el("span", { class: `badge ${status}`, "data-status": status }, t(`evals.status.${status}`));
}

function rate(counts) {
  const graded = counts.passed + counts.failed + counts.errored;
  return graded ? `${number((100 * counts.passed) / graded, 0)}%` : t("common.none");
}

export function renderEvals(main) {
  const list = el("div", {}, el("p", { class: "loading" }, t("common.loading")));
  main.append(el("h1", {}, t("evals.title")), el("p", { class: "muted" }, t("evals.intro")), list);
  (async () => {
    const evals = await allPages("/v1/evals?order=desc");
    if (!evals.length) { list.replaceChildren(el("p", { class: "empty" }, t("evals.empty"))); return; }
    const sections = [];
    for (const evaluation of evals) {
      const runs = await allPages(`/v1/evals/${evaluation.id}/runs?order=desc`);
      sections.push(el("section", { class: "panel" },
        el("h2", {}, evaluation.name, " ", el("span", { class: "muted" }, evaluation.id)),
        el("p", { class: "muted" }, evaluation.testing_criteria.map((c) => `${c.name} (${c.type})`).join(" · ")),
        runs.length ? el("div", { class: "table-wrap" }, el("table", {},
          el("thead", {}, el("tr", {}, el("th", {}, t("common.name")), el("th", {}, t("evals.model")),
            el("th", {}, t("jobs.status")), el("th", {}, t("evals.passed")), el("th", {}, t("common.created")))),
          el("tbody", {}, runs.map((run) => el("tr", {},
            el("td", {}, runLink(run)), el("td", {}, run.model || t("evals.given")),
            el("td", {}, runBadge(run.status)), el("td", { class: "num" }, rate(run.result_counts)),
            el("td", {}, when(new Date(run.created_at * 1000).toISOString())))))))
          : el("p", { class: "empty" }, t("evals.no_runs"))));
    }
    list.replaceChildren(...sections);
  })().catch((error) => list.replaceChildren(alertBox(error.message)));
}

export function renderEvalRun(main, { params }) {
  const [evalId, runId, otherId] = params;
  const head = el("div", {}, el("p", { class: "loading" }, t("common.loading")));
  const body = el("div");
  main.append(head, body);
  let timer = null;
  let stopped = false;

  async function load() {
    const [evaluation, run, runs] = await Promise.all([
      api(`/v1/evals/${evalId}`), api(`/v1/evals/${evalId}/runs/${runId}`),
      allPages(`/v1/evals/${evalId}/runs?order=desc`)]);
    const other = otherId ? await api(`/v1/evals/${evalId}/runs/${otherId}`) : null;
    const items = await allPages(`/v1/evals/${evalId}/runs/${runId}/output_items`);
    const otherItems = other ? await allPages(`/v1/evals/${evalId}/runs/${otherId}/output_items`) : [];
    if (stopped) return;
    head.replaceChildren(...header(evaluation, run, other, runs));
    body.replaceChildren(table(evaluation, run, items, other, otherItems));
    if ([run, other].some((r) => r && UNFINISHED.includes(r.status))) timer = setTimeout(() => refresh(), 1500);
  }

  function refresh() { load().catch((error) => head.replaceChildren(alertBox(error.message))); }

  function header(evaluation, run, other, runs) {
    const shown = [run, other].filter(Boolean);
    const compare = el("select", { id: "compare-with", "aria-label": t("evals.compare") },
      el("option", { value: "" }, t("evals.compare_none")),
      runs.filter((r) => r.id !== run.id).map((r) => el("option", { value: r.id, selected: other && r.id === other.id }, `${r.name} (${r.id})`)));
    compare.addEventListener("change", () => {
      location.hash = `#/evals/${evalId}/runs/${runId}${compare.value ? `/vs/${compare.value}` : ""}`;
    });
    return [
      el("p", {}, el("a", { href: "#/evals" }, `← ${t("evals.title")}`)),
      el("h1", {}, `${evaluation.name}: ${run.name}`),
      el("div", { class: "compare-runs" }, shown.map((r) => summary(r))),
      el("div", { class: "field" }, el("label", { for: "compare-with" }, t("evals.compare")), compare),
    ];
  }

  function summary(run) {
    const counts = run.result_counts;
    const done = counts.passed + counts.failed + counts.errored;
    return el("section", { class: "panel run-summary", "data-run": run.id },
      el("h2", {}, run.name, " ", runBadge(run.status)),
      el("p", { class: "muted" }, `${run.id} · ${run.model || t("evals.given")}`),
      UNFINISHED.includes(run.status) && counts.total
        ? progressBar((100 * done) / counts.total, { label: t("evals.progress") }) : null,
      el("p", { class: "run-counts" }, t("evals.counts", {
        passed: counts.passed, failed: counts.failed, errored: counts.errored, total: counts.total })),
      el("ul", { class: "criteria" }, run.per_testing_criteria_results.map((c) =>
        el("li", {}, `${c.testing_criteria}: ${c.passed}/${c.passed + c.failed}`))),
      run.error ? alertBox(run.error.message) : null);
  }

  // An item as a person reads it: its text fields, a conversation as its turns (not the
  // JSON of `messages`, and not at all where it only repeats the question), anything else
  // folded away under its name.
  function itemView(item) {
    const text = (content) => Array.isArray(content)
      ? content.map((part) => part.text || "").join("") : String(content ?? "");
    const turns = Array.isArray(item.messages) ? item.messages : null;
    const repeats = turns && typeof item.question === "string" && turns.length === 1
      && text(turns[0].content) === item.question;
    return Object.entries(item).filter(([key]) => !(key === "messages" && repeats)).map(([key, value]) => {
      if (typeof value === "string" || typeof value === "number") {
        return el("div", {}, el("strong", {}, `${key}: `), String(value));
      }
      if (key === "messages" && turns) {
        return el("div", { class: "turns" }, turns.map((m) =>
          el("div", {}, el("strong", {}, `${m.role}: `), text(m.content))));
      }
      return el("details", {}, el("summary", {}, key), el("pre", {}, JSON.stringify(value, null, 1)));
    });
  }

  function table(evaluation, run, items, other, otherItems) {
    const names = evaluation.testing_criteria.map((c) => c.name);
    const others = new Map(otherItems.map((i) => [i.datasource_item_id, i]));
    const runs = other ? [run, other] : [run];
    return el("div", { class: "table-wrap" }, el("table", { id: "eval-items" },
      el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, t("evals.item")),
        runs.map((r) => [el("th", {}, `${t("evals.answer")} (${r.name})`),
          names.map((name) => el("th", {}, other ? `${name} (${r.name})` : name))]))),
      el("tbody", {}, items.map((item) => {
        const pair = other ? [item, others.get(item.datasource_item_id)] : [item];
        return el("tr", { "data-item": item.datasource_item_id },
          el("td", { class: "num" }, item.datasource_item_id),
          el("td", { class: "item" }, itemView(item.datasource_item)),
          pair.map((one) => one ? [
            el("td", { class: `answer ${one.status}` }, one.sample.error ? one.sample.error.message
              : one.sample.output.map((m) => m.content).join("")),
            names.map((name) => {
              const result = one.results.find((r) => r.name === name);
              // None: the item errored, or the criterion does not grade it (an optional
              // field it reads, such as one Promptfoo test's assert, is not in this item).
              if (!result) return el("td", { class: one.status === "error" ? "score error" : "score" }, t("common.none"));
              return el("td", { class: `score ${result.passed ? "pass" : "fail"}`, title: result.error || result.explanation || "" },
                number(result.score, 2), result.passed ? " ✓" : " ✗");
            })] : [el("td", {}, t("common.none")), names.map(() => el("td", {}, t("common.none")))]));
      }))));
  }

  refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
