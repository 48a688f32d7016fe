// Ask a fine-tuned model, with the base model's answer beside it, both streamed as they
// are generated (through the OpenAI chat API). Answers are text only. Each question is
// asked on its own, as a FAQ is asked; with "Follow up" checked, it goes on the
// conversation so far instead, each model with its own answers, until a new one starts.
import { api, streamChat } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el } from "../ui.js";

export function renderPlayground(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const wanted = params.get("job"), wantedCheckpoint = params.get("checkpoint");
  const select = el("select", { id: "play-model" });
  const question = el("textarea", { id: "play-question", required: true, maxlength: "8000" });
  // Empty: the tuned model ends its answer itself (a 256 cap cut long trained answers).
  const maxTokens = el("input", { id: "play-max", type: "number", min: 1, max: 2048, placeholder: t("play.until_done") });
  const temperature = el("input", { id: "play-temp", type: "number", min: 0, max: 2, step: 0.1, value: 0 });
  const topP = el("input", { id: "play-top-p", type: "number", min: 0.05, max: 1, step: 0.05, value: 1 });
  const tuned = el("div", { class: "answer", id: "answer-tuned", "aria-live": "polite" });
  const base = el("div", { class: "answer", id: "answer-base", "aria-live": "polite" });
  const errorBox = el("div");
  const ask = el("button", { type: "submit", id: "ask" }, t("play.ask"));
  const threads = { tuned: el("div", { class: "thread", id: "thread-tuned" }), base: el("div", { class: "thread", id: "thread-base" }) };
  const boxes = { tuned, base };
  let said = { tuned: [], base: [] };  // each model's conversation so far: its own answers
  // Off: every question alone (a model trained on single questions answers them so; a
  // second one asked after a first exchange read as gibberish). On: a conversation.
  const followUp = el("input", { id: "play-follow-up", type: "checkbox" });
  const restart = el("button", { type: "button", class: "secondary", id: "new-conversation", onclick: () => {
    said = { tuned: [], base: [] };
    render("tuned"); render("base");
    question.focus();
  } }, t("play.new_conversation"));
  // The built-in demo model has random weights: say so beside its answers.
  const untrained = el("p", { class: "hint", id: "base-untrained", hidden: true }, t("play.untrained"));
  const noteBase = () => { untrained.hidden = !select.selectedOptions[0]?.dataset.base?.startsWith("builtin:"); };
  const form = el("form", { class: "panel" },
    errorBox,
    el("div", { class: "field" }, el("label", { for: "play-model" }, t("play.model")), select),
    el("div", { class: "field" }, el("label", { for: "play-question" }, t("play.question")), question),
    el("details", {}, el("summary", {}, t("play.settings")), el("div", { class: "form-grid" },
      el("div", { class: "field" }, el("label", { for: "play-max" }, t("play.max_new_tokens")), maxTokens),
      el("div", { class: "field" }, el("label", { for: "play-temp" }, t("play.temperature")), temperature),
      el("div", { class: "field" }, el("label", { for: "play-top-p" }, t("play.top_p")), topP))),
    el("div", { class: "field" }, el("label", { for: "play-follow-up" }, followUp, " ", t("play.follow_up"))),
    ask, " ", restart);
  main.append(el("h1", {}, t("play.title")), form,
    el("div", { class: "grid2" },
      el("section", { class: "panel" }, el("h2", {}, t("play.finetuned")), threads.tuned, tuned),
      el("section", { class: "panel" }, el("h2", {}, t("play.base")), untrained, threads.base, base)));
  select.addEventListener("change", () => { restart.click(); noteBase(); });

  // The thread shows the conversation so far; the box below it, the newest answer (or the
  // one being made for `pending`, the question just asked).
  function render(which, pending) {
    const turn = (m) => el("div", { class: "turn" }, el("span", { class: "role" }, t(`role.${m.role}`)), m.content);
    const shown = pending ? [...said[which], pending] : said[which].slice(0, -1);
    threads[which].replaceChildren(...shown.map(turn));
    // textContent: model output is never HTML
    boxes[which].textContent = pending ? t("play.thinking") : (said[which].at(-1)?.content ?? "");
  }

  // The base model's answer may go on after the tuned one ended: Ask works again at once,
  // and the base answer stops at about the tuned one's length (an untrained base rarely
  // ends by itself). A new question stops it too.
  let baseRun = null, baseDone = Promise.resolve();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!select.value || !question.value.trim()) return;
    ask.disabled = true;
    baseRun?.abort();
    await baseDone;  // the stopped answer joins the base model's conversation first
    if (!followUp.checked) said = { tuned: [], base: [] };  // asked on its own
    errorBox.replaceChildren();
    const chosen = select.selectedOptions[0];
    const limit = Number(maxTokens.value) || null;
    const sampling = { temperature: Number(temperature.value) || 0, top_p: Number(topP.value) || 1 };
    const asked = { role: "user", content: question.value };
    let enough = Infinity;  // characters of base answer to show, once the tuned one ended
    const run = (baseRun = new AbortController());
    const streamInto = async (which, model, options, signal) => {
      const messages = [...said[which], asked];
      render(which, asked);
      let answer = "";
      try {
        await streamChat(model, messages, options, (text) => {
          answer += text;
          boxes[which].textContent = answer;
          if (answer.length > enough) run.abort();
        }, signal);
      } catch (error) {
        if (error.name !== "AbortError") { render(which); throw error; }
        // stopped here: the answer as far as it went, cut where "enough" was reached (a
        // streamed chunk can carry many characters past it)
        answer = answer.slice(0, enough) + " …";
        boxes[which].textContent = answer;
      }
      said[which] = [...messages, { role: "assistant", content: answer }];
    };
    baseDone = streamInto("base", chosen.dataset.base, { ...sampling, max_tokens: limit || 256 }, run.signal)
      .catch((error) => { if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message)); });
    try {
      await streamInto("tuned", chosen.value, limit ? { ...sampling, max_tokens: limit } : sampling);
      enough = Math.max(40, Math.round(said.tuned.at(-1).content.length * 1.5));
      if (boxes.base.textContent.length > enough) run.abort();
      question.value = "";
    } catch (error) {
      run.abort();
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    } finally {
      ask.disabled = false;
    }
    await baseDone;
  });

  (async () => {
    try {
      const { adapters } = await api("/models");
      const option = (id, base, label) => el("option", { value: id, "data-base": base }, label);
      const options = adapters.map((a) => option(a.id, a.base_model, `#${a.job_id} ${a.name}`));
      if (wanted && wantedCheckpoint) {
        const job = await api(`/jobs/${wanted}`);
        const saved = await api(`/v1/fine_tuning/jobs/ftjob-${wanted}/checkpoints?limit=100`);
        const checkpoint = saved.data.find((c) => c.step_number === Number(wantedCheckpoint));
        if (checkpoint) {
          options.unshift(option(checkpoint.fine_tuned_model_checkpoint, job.base_model,
            `#${wanted} · ${t("detail.checkpoint_step", { step: wantedCheckpoint })}`));
        }
      }
      if (!options.length) { form.replaceChildren(el("div", { class: "empty" }, t("play.none"))); return; }
      select.replaceChildren(...options);
      if (wanted) {
        const pick = options.find((o) => wantedCheckpoint
          ? o.value.endsWith(`:ckpt-step-${wantedCheckpoint}`) && o.value.includes(`:ftjob-${wanted}:`)
          : o.value.endsWith(`:ftjob-${wanted}`));
        if (pick) select.value = pick.value;
      }
      noteBase();
    } catch (error) {
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    }
  })();
}
