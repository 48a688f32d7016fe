// New job: base model, dataset (or upload here), hyperparameters with explained defaults,
// the planner's estimate, and the API's complaints next to the fields they are about.
import { api } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, duration, el, number } from "../ui.js";
import { uploadWidget } from "./datasets.js";

const FIELDS = [
  ["epochs", "number", { min: 1, max: 100, step: 1 }],
  ["max_minutes", "number", { min: 1, max: 10080, step: "any", placeholder: "—" }],
  ["learning_rate", "text", {}],
  ["batch_size", "number", { min: 1, max: 512, step: 1 }],
  ["micro_batch_size", "number", { min: 1, max: 512, step: 1 }],
  ["lora_r", "number", { min: 1, max: 256, step: 1 }],
  ["lora_alpha", "number", { min: 1, max: 1024, step: 1 }],
  ["max_seq_length", "number", { min: 16, max: 32768, step: 1 }],
  ["validation_split", "number", { min: 0, max: 0.5, step: 0.05 }],
  ["beta", "number", { min: 0.01, max: 10, step: 0.01 }],
  ["group_size", "number", { min: 2, max: 64, step: 1 }],
];

const OTHER = "__other__";  // the model select's "type a name" entry (admins)

export function renderNewJob(main, { user }) {
  const errorBox = el("div");
  const modelSelect = el("select", { id: "base_model", name: "base_model" });
  // Admins may type a hub id or a model directory on the server, checked as they type.
  const modelInput = el("input", { id: "base_model_name", type: "text", hidden: true, spellcheck: "false",
    placeholder: t("new.model_typed_placeholder"), "aria-label": t("new.model_typed") });
  const modelCheck = el("div", { id: "model-check", class: "hint", role: "status" });
  const chosenModel = () => (modelSelect.value === OTHER ? modelInput.value.trim() : modelSelect.value);
  const datasetSelect = el("select", { id: "dataset_id", name: "dataset_id", required: true });
  // A fine-tuned model of one's own to train further (its base and LoRA shape), or none.
  const startSelect = el("select", { id: "base_job_id", name: "base_job_id" });
  startSelect.addEventListener("change", () => { modelSelect.disabled = Boolean(startSelect.value); estimate(); });
  const nameInput = el("input", { id: "job-name", name: "name", maxlength: "200" });
  const estimateBox = el("div", { id: "estimate", class: "muted" });
  const fieldNodes = {};

  function field(id, labelKey, control, helpKey) {
    const node = el("div", { class: "field", "data-field": id },
      el("label", { for: control.id }, t(labelKey)), control,
      helpKey ? el("p", { class: "hint", id: `${control.id}-help` }, t(helpKey)) : null);
    if (helpKey) control.setAttribute("aria-describedby", `${control.id}-help`);
    fieldNodes[id] = node;
    return node;
  }

  const hyperInputs = {};
  const hyperFields = FIELDS.map(([name, type, attrs]) => {
    const input = el("input", { id: `hp-${name}`, name, type, placeholder: "auto", inputmode: "decimal", ...attrs });
    hyperInputs[name] = input;
    return field(`hyperparameters.${name}`, `hp.${name}`, input, `hp.${name}.help`);
  });
  // supervised or DPO: by default what the dataset holds (preference pairs tune with DPO).
  const method = el("select", { id: "method", name: "method" },
    ["", "supervised", "dpo", "reinforcement"].map((m) => el("option", { value: m }, t(`new.method_${m || "auto"}`))));
  // Reinforcement: OpenAI's grader JSON, an exact-answer check to start from.
  const grader = el("textarea", { id: "grader", name: "grader", rows: 6, spellcheck: "false" },
    JSON.stringify({ type: "string_check", name: "exact", input: "{{sample.output_text}}",
      reference: "{{item.answer}}", operation: "eq" }, null, 2));
  const graderField = field("grader", "new.grader", grader, "new.grader_note");
  graderField.hidden = true;
  method.addEventListener("change", () => { graderField.hidden = method.value !== "reinforcement"; });
  const precision = el("select", { id: "hp-precision" }, ["auto", "bf16", "fp16", "fp32"].map((p) => el("option", { value: p }, p)));
  hyperFields.push(field("hyperparameters.precision", "hp.precision", precision, "hp.precision.help"));
  // The frozen base's weights: auto quantizes only a base that would not fit otherwise.
  const quantization = el("select", { id: "hp-quantization" },
    ["auto", "none", "8bit", "4bit"].map((q) => el("option", { value: q }, t(`hp.quantization.${q}`))));
  hyperFields.push(field("hyperparameters.quantization", "hp.quantization", quantization, "hp.quantization.help"));

  const submit = el("button", { type: "submit", id: "submit-job" }, t("new.submit"));
  const form = el("form", { class: "panel", novalidate: true },
    errorBox,
    field("base_model", "new.model", el("div", { class: "model-pick" }, modelSelect, modelInput, modelCheck), "new.builtin_note"),
    field("base_job_id", "new.start_from", startSelect, "new.start_from_note"),
    field("method", "new.method", method, "new.method_note"),
    graderField,
    field("dataset_id", "new.dataset", datasetSelect),
    el("details", {}, el("summary", {}, t("new.upload_here")), uploadWidget(async (dataset) => {
      await loadDatasets(); datasetSelect.value = String(dataset.id); estimate();
    })),
    el("br"),
    field("name", "new.name", nameInput),
    el("h2", {}, t("new.hyper")), el("p", { class: "hint" }, t("new.hyper_hint")),
    el("div", { class: "form-grid" }, hyperFields),
    el("h2", {}, t("new.estimate")), estimateBox, el("br"),
    submit);
  main.append(el("h1", {}, t("new.title")), form);

  // A typed name: checked at once (cached here? reachable? a model at all?), said beside it.
  let checking, checked = "";
  async function checkModel() {
    const name = chosenModel();
    if (modelSelect.value !== OTHER || !name || name === checked) return;
    checked = name;
    modelCheck.textContent = t("new.model_checking");
    try {
      const result = await api(`/models/check?name=${encodeURIComponent(name)}`);
      if (chosenModel() !== name) return;
      modelCheck.className = result.usable ? "hint" : "field-error";
      modelCheck.textContent = `${result.usable ? "✓" : "✗"} ${result.message}`;
    } catch (error) {
      if (chosenModel() === name) { modelCheck.className = "field-error"; modelCheck.textContent = error.message; }
    }
  }
  modelSelect.addEventListener("change", () => {
    modelInput.hidden = modelSelect.value !== OTHER;
    modelCheck.textContent = ""; checked = "";
    if (!modelInput.hidden) modelInput.focus();
  });
  modelInput.addEventListener("input", () => { clearTimeout(checking); checking = setTimeout(checkModel, 500); });

  function body() {
    const hyperparameters = {};
    for (const [name, input] of Object.entries(hyperInputs)) {
      const raw = input.value.trim();
      if (raw && raw !== "auto") hyperparameters[name] = Number(raw);
    }
    if (precision.value !== "auto") hyperparameters.precision = precision.value;
    if (quantization.value !== "auto") hyperparameters.quantization = quantization.value;
    const payload = { dataset_id: Number(datasetSelect.value) || null, hyperparameters };
    if (startSelect.value) payload.base_job_id = Number(startSelect.value);
    else payload.base_model = chosenModel();
    if (method.value) payload.method = method.value;
    if (method.value === "reinforcement") {
      try { payload.grader = JSON.parse(grader.value); }
      catch { payload.grader = grader.value; }  // the server says what is wrong with it
    }
    if (nameInput.value.trim()) payload.name = nameInput.value.trim();
    return payload;
  }

  function showErrors(error) {
    for (const node of Object.values(fieldNodes)) {
      node.classList.remove("invalid");
      node.querySelector(".field-error")?.remove();
    }
    errorBox.replaceChildren(alertBox(error.message));
    for (const problem of error.errors || []) {
      // A grader's own fields ("grader.input") are shown at the grader
      const node = fieldNodes[problem.field] || fieldNodes[String(problem.field).split(".")[0]];
      if (!node) continue;
      node.classList.add("invalid");
      node.append(el("div", { class: "field-error", role: "alert" }, problem.message));
    }
  }

  let estimating;
  async function estimate() {
    clearTimeout(estimating);
    estimating = setTimeout(async () => {
      if (!datasetSelect.value) { estimateBox.textContent = ""; return; }
      try {
        const plan = await api("/jobs/estimate", { method: "POST", json: body() });
        estimateBox.replaceChildren(el("div", { class: plan.fits ? "" : "field-error" },
          `${plan.fits ? "✓" : "✗"} ${number(plan.estimated_peak_gb, 2)} GB / ${number(plan.memory_budget_gb, 1)} GB · `
          + `${plan.device} ${plan.precision}`
          + (plan.quantization && plan.quantization !== "none" ? ` · ${t(`hp.quantization.${plan.quantization}`)}` : "")
          + ` · ${t("new.micro_batches", { size: plan.micro_batch_size, steps: plan.gradient_accumulation_steps })}`
          + (plan.estimated_run_seconds ? ` · ${t(`new.time_${plan.estimated_from}`, { time: duration(plan.estimated_run_seconds) })}` : "")),
          ...(plan.fits ? [] : [el("div", { class: "field-error" }, plan.advice)]));
      } catch (error) {
        estimateBox.textContent = error.status === 404 ? "" : error.message;
      }
    }, 300);
  }
  form.addEventListener("input", estimate);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    try {
      const job = await api("/jobs", { method: "POST", json: body() });
      location.hash = `#/jobs/${job.id}`;
    } catch (error) {
      if (error.status !== 401) showErrors(error);
    } finally {
      submit.disabled = false;
    }
  });

  async function loadDatasets() {
    const datasets = (await api("/datasets")).filter((d) => d.purpose !== "evals");  // not training data
    datasetSelect.replaceChildren(el("option", { value: "" }, t("new.pick_dataset")),
      ...datasets.map((d) => el("option", { value: d.id }, `${d.name} (${d.num_examples})`)));
    if (!datasets.length) errorBox.replaceChildren(alertBox(t("new.no_datasets"), "info"));
    else if (datasets.length) datasetSelect.value = String(datasets[0].id);
  }

  (async () => {
    try {
      const models = await api("/models");
      const group = (kind) => models.base_models.filter((m) => (kind === "cached") === (m.kind === "cached"))
        .map((m) => el("option", { value: m.name }, m.name));
      const cached = group("cached");
      modelSelect.replaceChildren(...group("offered"),
        ...(cached.length ? [el("optgroup", { label: t("new.model_cached") }, cached)] : []),
        ...(user.is_admin ? [el("option", { value: OTHER }, t("new.model_typed"))] : []));
      startSelect.replaceChildren(el("option", { value: "" }, t("new.start_new")),
        ...models.adapters.map((a) => el("option", { value: a.job_id }, `#${a.job_id} ${a.name} (${a.base_model})`)));
      await loadDatasets();
      estimate();
    } catch (error) {
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    }
  })();
}
