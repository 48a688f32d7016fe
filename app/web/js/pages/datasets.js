// Datasets: upload (picker or drag and drop), every problem with its line, preview, delete.
import { api } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el, number, problemList, toast, when } from "../ui.js";

export function uploadWidget(onUploaded) {
  const input = el("input", { type: "file", id: "dataset-file", accept: ".jsonl,.ndjson,.json,.csv,.tsv,.txt,.xlsx", class: "visually-hidden" });
  const result = el("div", { id: "upload-result" });
  const zone = el("div", { class: "dropzone", id: "dropzone" },
    t("datasets.drop"), " ",
    el("label", { for: "dataset-file", class: "button secondary", style: "display:inline-block;font-weight:400" }, t("datasets.choose")),
    input,
    el("p", { class: "hint" }, t("datasets.formats")));
  async function send(file) {
    result.replaceChildren(el("p", { class: "loading" }, t("common.loading")));
    const form = new FormData();
    form.append("file", file);
    try {
      const dataset = await api("/datasets", { method: "POST", form });
      result.replaceChildren(alertBox(t("datasets.uploaded", { name: dataset.name, n: dataset.num_examples }), "info"),
        ...passedOver(dataset));
      onUploaded(dataset);
    } catch (error) {
      if (error.status !== 401) result.replaceChildren(problemList(error));
    }
    input.value = "";
  }
  input.addEventListener("change", () => input.files[0] && send(input.files[0]));
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    if (e.dataTransfer.files[0]) send(e.dataTransfer.files[0]);
  });
  return el("div", {}, zone, result);
}

// What reading the file passed over (a sheet without a table, a column not read): the
// upload went on, but a row the user meant to train may be there.
function passedOver(dataset) {
  if (!dataset.notes?.length) return [];
  return [el("div", { class: "alert warning", role: "status", id: "dataset-notes" },
    t("datasets.notes"), el("ul", {}, dataset.notes.map((note) => el("li", {}, note))))];
}

export function previewTable(dataset) {
  return el("div", { class: "table-wrap" }, el("table", { class: "preview", id: "dataset-preview" },
    el("thead", {}, el("tr", {}, el("th", {}, t("datasets.question")), el("th", {}, t("datasets.answer")))),
    el("tbody", {}, dataset.preview.map((row) => el("tr", {}, el("td", {}, ...asked(row)),
      el("td", {}, ...said(row.answer, row.answer_tool_calls)))))));
}

// A conversation's answer is learned after everything said before it: show that too, and
// with function calling the tools offered, the calls made and their results.
function asked(row) {
  const turn = (role, ...what) => el("div", { class: "turn" }, el("span", { class: "role" }, t(`role.${role}`)), ...what);
  const tools = row.tools ? JSON.parse(row.tools).map((tool) => tool.function.name) : [];
  const earlier = [...(row.system ? [{ role: "system", content: row.system }] : []), ...(row.history || [])];
  const later = row.tool_turns || [];
  const shown = (x) => turn(x.role, ...said(x.content, x.tool_calls));
  return [
    ...(tools.length ? [turn("tools", tools.join(", "))] : []),
    ...earlier.map(shown),
    row.history?.length || later.length ? turn("user", row.question) : row.question,
    ...later.map(shown),
  ];
}

function said(content, calls) {
  return [content, ...(calls || []).map((call) => el("code", { class: "call" }, `${call.name}(${call.arguments})`))];
}

export function renderDatasets(main) {
  const list = el("div", {}, el("p", { class: "loading" }, t("common.loading")));
  const preview = el("section", { id: "preview" });
  main.append(
    el("h1", {}, t("datasets.title")),
    el("section", { class: "panel" }, el("h2", {}, t("datasets.upload")), uploadWidget(async (dataset) => {
      await load();
      showPreview(dataset, false);  // its notes stand beside the upload's result
    })),
    list, preview);

  function showPreview(dataset, withNotes = true) {
    preview.replaceChildren(el("div", { class: "panel" },
      el("h2", {}, t("datasets.preview", { name: dataset.name })),
      ...(withNotes ? passedOver(dataset) : []), previewTable(dataset)));
  }

  async function load() {
    try {
      const datasets = await api("/datasets");
      if (!datasets.length) { list.replaceChildren(el("div", { class: "panel empty" }, t("datasets.empty"))); return; }
      list.replaceChildren(el("div", { class: "table-wrap" }, el("table", { id: "datasets-table" },
        el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, t("common.name")), el("th", {}, t("datasets.format")),
          el("th", {}, t("datasets.rows")), el("th", { class: "hide-sm" }, t("common.created")), el("th", {}, ""))),
        el("tbody", {}, datasets.map((d) => el("tr", { "data-dataset": d.id },
          el("td", { class: "num" }, d.id),
          el("td", {}, el("button", { class: "link", onclick: async () => showPreview(await api(`/datasets/${d.id}`)) }, d.name)),
          el("td", {}, d.format), el("td", { class: "num" }, number(d.num_examples)),
          el("td", { class: "hide-sm" }, when(d.created_at)),
          el("td", {}, el("button", { class: "danger", "aria-label": `${t("common.delete")} ${d.name}`, onclick: async () => {
            if (!confirm(t("datasets.delete_confirm"))) return;
            try { await api(`/datasets/${d.id}`, { method: "DELETE" }); preview.replaceChildren(); load(); }
            catch (error) { toast(error.message); }
          } }, t("common.delete")))))))));
    } catch (error) {
      if (error.status !== 401) list.replaceChildren(alertBox(error.message));
    }
  }
  load();
}
