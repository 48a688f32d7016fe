// Ask a fine-tuned model, with the base model's answer beside it. Answers are text only.
import { api } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el } from "../ui.js";

export function renderPlayground(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const wanted = params.get("job"), wantedCheckpoint = params.get("checkpoint");
  const select = el("select", { id: "play-model" });
  const question = el("textarea", { id: "play-question", required: true, maxlength: "8000" });
  const maxTokens = el("input", { id: "play-max", type: "number", min: 1, max: 2048, value: 256 });
  const temperature = el("input", { id: "play-temp", type: "number", min: 0, max: 2, step: 0.1, value: 0 });
  const topP = el("input", { id: "play-top-p", type: "number", min: 0.05, max: 1, step: 0.05, value: 1 });
  const tuned = el("div", { class: "answer", id: "answer-tuned", "aria-live": "polite" });
  const base = el("div", { class: "answer", id: "answer-base", "aria-live": "polite" });
  const errorBox = el("div");
  const ask = el("button", { type: "submit", id: "ask" }, t("play.ask"));
  const form = el("form", { class: "panel" },
    errorBox,
    el("div", { class: "field" }, el("label", { for: "play-model" }, t("play.model")), select),
    el("div", { class: "field" }, el("label", { for: "play-question" }, t("play.question")), question),
    el("details", {}, el("summary", {}, t("play.settings")), el("div", { class: "form-grid" },
      el("div", { class: "field" }, el("label", { for: "play-max" }, t("play.max_new_tokens")), maxTokens),
      el("div", { class: "field" }, el("label", { for: "play-temp" }, t("play.temperature")), temperature),
      el("div", { class: "field" }, el("label", { for: "play-top-p" }, t("play.top_p")), topP))),
    el("br"), ask);
  main.append(el("h1", {}, t("play.title")), form,
    el("div", { class: "grid2" },
      el("section", { class: "panel" }, el("h2", {}, t("play.finetuned")), tuned),
      el("section", { class: "panel" }, el("h2", {}, t("play.base")), base)));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!select.value || !question.value.trim()) return;
    ask.disabled = true;
    errorBox.replaceChildren();
    tuned.textContent = t("play.thinking");
    base.textContent = t("play.thinking");
    try {
      const [jobId, step] = select.value.split("@");
      const reply = await api(`/jobs/${jobId}/query`, { method: "POST", json: {
        question: question.value, max_new_tokens: Number(maxTokens.value) || 256,
        temperature: Number(temperature.value) || 0, top_p: Number(topP.value) || 1, compare_base: true,
        ...(step ? { checkpoint_step: Number(step) } : {}),
      } });
      tuned.textContent = reply.answer;  // textContent: model output is never HTML
      base.textContent = reply.base_answer;
    } catch (error) {
      tuned.textContent = ""; base.textContent = "";
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    } finally {
      ask.disabled = false;
    }
  });

  (async () => {
    try {
      const { adapters } = await api("/models");
      const options = adapters.map((a) => el("option", { value: a.job_id }, `#${a.job_id} ${a.name}`));
      if (wanted && wantedCheckpoint) {
        options.unshift(el("option", { value: `${wanted}@${wantedCheckpoint}` },
          `#${wanted} · ${t("detail.checkpoint_step", { step: wantedCheckpoint })}`));
      }
      if (!options.length) { form.replaceChildren(el("div", { class: "empty" }, t("play.none"))); return; }
      select.replaceChildren(...options);
      if (wanted) select.value = wantedCheckpoint ? `${wanted}@${wantedCheckpoint}` : wanted;
    } catch (error) {
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    }
  })();
}
