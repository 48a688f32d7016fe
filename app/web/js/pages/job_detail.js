// One job, live: progress, loss chart, streamed log, and what can be done with it.
import { api, streamEvents } from "../api.js";
import { locale, t } from "../i18n.js";
import { alertBox, badge, duration, el, lossChart, number, progressBar, queuePlace, setProgress, stat, toast, when } from "../ui.js";

export function renderJobDetail(main, { params }) {
  const jobId = Number(params[0]);
  const controller = new AbortController();
  const losses = [];
  let job = null;
  let timer;

  const title = el("h1", { id: "job-title" }, `#${jobId}`);
  const status = el("span");
  const actions = el("div", { class: "actions" });
  const errorBox = el("div");
  const bar = progressBar(0, { big: true });
  const barLabel = el("div", { class: "progress-label", id: "progress-label" });
  const stats = el("div", { class: "stats" });
  const chart = el("div", { class: "chart", id: "loss-chart" }, lossChart([]));
  // DPO: how far each step prefers the preferred answers, and how often it ranks them right.
  const margins = [];
  const marginChart = el("div", { class: "chart", id: "margin-chart" });
  const marginPanel = el("section", { class: "panel", id: "margin", hidden: true },
    el("h2", {}, t("detail.reward_margin")), el("p", { class: "hint", id: "reward-accuracy" }), marginChart);
  // Reinforcement: each step's mean reward, its spread within a prompt's group and the KL.
  const rewards = [];
  const rewardChart = el("div", { class: "chart", id: "reward-chart" });
  const rewardPanel = el("section", { class: "panel", id: "reward", hidden: true },
    el("h2", {}, t("detail.reward")), el("p", { class: "hint", id: "reward-figures" }),
    el("p", { class: "hint", id: "reward-validation" }), rewardChart);
  const checkpointList = el("div", { id: "checkpoints" });
  const answers = el("section", { class: "panel", id: "answers", hidden: true });
  const exportsPanel = el("section", { class: "panel", id: "exports", hidden: true });
  const evalPanel = el("section", { class: "panel", id: "job-eval", hidden: true });
  const log = el("div", { class: "log", id: "job-log", tabindex: "0", role: "log", "aria-live": "off" });
  const followNote = el("span", { class: "hint" }, t("detail.follow"));
  let follow = true;
  log.addEventListener("scroll", () => {
    follow = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    followNote.textContent = follow ? t("detail.follow") : t("detail.paused");
  });
  // A long job holds 100,000 events (about one a training second). The curves come from
  // /series, a few hundred points, and stay that size as events stream in; the log keeps
  // its last LOG_WINDOW lines while followed and reads older ones back a page at a time;
  // both are drawn at most once a frame, however many events the frame brought.
  const LOG_WINDOW = 1000, LOG_PAGE = 500, CHART_POINTS = 600;
  let firstShown = 0, seriesThrough = 0, drawing = false, plotted = true;  // plotted: a chart changed
  const earlier = el("button", { class: "secondary", id: "log-earlier", hidden: true, onclick: loadEarlier },
    t("detail.log_earlier"));

  main.append(
    el("p", {}, el("a", { href: "#/jobs" }, `← ${t("detail.back")}`)),
    el("div", { class: "header-row" }, el("div", {}, title, " ", status), actions),
    errorBox,
    el("section", { class: "panel", "aria-labelledby": "progress-h" },
      el("h2", { id: "progress-h" }, t("detail.progress")), bar, barLabel, el("br"), stats),
    el("div", { class: "grid2" },
      el("section", { class: "panel" }, el("h2", {}, t("detail.loss")), chart),
      el("section", { class: "panel" }, el("h2", {}, t("detail.log")), earlier, log, followNote)),
    marginPanel,
    rewardPanel,
    answers,
    evalPanel,
    exportsPanel,
    el("section", { class: "panel" }, el("h2", {}, t("detail.checkpoints")), checkpointList));

  // What ends the run: the data learned (auto epochs) or a number of epochs, and the time limit.
  function stops() {
    const r = job.resolved_hyperparameters;
    if (!r) return t("common.none");
    const parts = [t(r.until_learned ? "detail.stops_learned" : "detail.stops_epochs", { epochs: r.epochs })];
    if (r.max_minutes) parts.push(t("detail.stops_minutes", { minutes: number(r.max_minutes, 1) }));
    return parts.join(" · ");
  }

  let answersShown = false;
  async function loadAnswers() {
    if (answersShown || !job.actions.includes("ask")) return;
    answersShown = true;
    const report = await api(`/jobs/${jobId}/evaluation`);
    const cell = (text, cls) => el("td", { class: cls, title: text }, text);
    answers.replaceChildren(
      el("h2", {}, t("detail.answers")),
      el("p", { class: "hint" }, t(`detail.answers_${report.split}`)),
      el("p", { id: "answers-summary" }, t("detail.answers_summary", {
        exact: number(report.exact_match * 100, 1), base: number(report.base_exact_match * 100, 1),
        count: report.questions }), report.kept_reason ? ` ${t("detail.kept", { reason: report.kept_reason[0].toUpperCase() + report.kept_reason.slice(1) })}` : "",
        report.unfinished ? ` ${t("detail.answers_unfinished", { count: report.unfinished })}` : ""),
      el("div", { class: "table-wrap" }, el("table", { class: "answers" },
        el("thead", {}, el("tr", {}, ["question", "expected", "tuned", "base", "match"].map((k) =>
          el("th", { class: k === "match" ? "narrow" : "" }, t(`eval.${k}`))))),
        el("tbody", {}, report.rows.map((row) => el("tr", { class: row.match ? "match" : "miss" },
          cell(row.question), cell(row.expected), cell(row.tuned), cell(row.base, "muted"),
          el("td", { class: "narrow" }, row.match ? "✓" : "✗")))))));
    answers.hidden = false;
  }

  // Each export of the model: prepare it (background work on the server), watch it, download it.
  let exportsTimer;
  // Grade the model (and its base) on a held-out file: an eval whose report opens on its page.
  async function loadEvalPanel() {
    evalPanel.hidden = !job.actions.includes("ask");
    if (evalPanel.hidden || evalPanel.childElementCount) return;
    const datasets = (await api("/datasets")).filter((d) => d.purpose !== "evals");  // pairs to grade on
    // The job's own kind of data first: its held-out file, then files holding what it
    // trained on (preference pairs for DPO, …), then the rest; its training file last.
    const trained = datasets.find((d) => d.id === job.dataset_id);
    const kind = trained?.kind ?? ({ dpo: "preference", reinforcement: "reinforcement" }[job.method] || "qa");
    const rank = (d) => d.id === job.validation_dataset_id ? 0 : d.id === job.dataset_id ? 3 : d.kind === kind ? 1 : 2;
    datasets.sort((a, b) => rank(a) - rank(b));  // stable: newest first within a rank
    const dataset = el("select", { id: "eval-dataset" },
      datasets.map((d) => el("option", { value: d.id }, `${d.name} (${d.num_examples})`)));
    const criteria = ["exact", "contains", "similar"].map((name) =>
      el("input", { type: "checkbox", value: name, id: `eval-${name}`, checked: name !== "contains" }));
    const base = el("input", { type: "checkbox", id: "eval-base", checked: true });
    const result = el("div", { id: "eval-result" });
    async function start(event) {
      event.preventDefault();
      result.replaceChildren();
      try {
        const made = await api(`/jobs/${jobId}/evals`, { method: "POST", json: {
          dataset_id: Number(dataset.value), compare_base: base.checked,
          criteria: criteria.filter((box) => box.checked).map((box) => box.value) } });
        const report = made.report_url.slice(made.report_url.indexOf("#"));
        result.replaceChildren(el("p", {}, el("a", { href: report, id: "eval-report" }, t("jobeval.report"))));
      } catch (error) {
        if (error.status !== 401) result.replaceChildren(alertBox(error.message));
      }
    }
    evalPanel.replaceChildren(el("h2", {}, t("jobeval.title")), el("p", { class: "hint" }, t("jobeval.hint")),
      datasets.length ? el("form", { onsubmit: start },
        el("div", { class: "field" }, el("label", { for: "eval-dataset" }, t("new.dataset")), dataset),
        el("div", { class: "field" }, criteria.map((box) =>
          el("label", { for: box.id }, box, " ", t(`jobeval.${box.value}`), " "))),
        el("div", { class: "field" }, el("label", { for: "eval-base" }, base, " ", t("jobeval.base"))),
        el("button", { type: "submit", id: "eval-start" }, t("jobeval.start")), result)
        : el("p", { class: "empty" }, t("jobeval.no_datasets")));
  }

  async function loadExports() {
    clearTimeout(exportsTimer);
    if (!job.actions.includes("ask")) { exportsPanel.hidden = true; return; }
    const states = await api(`/jobs/${jobId}/exports`);
    exportsPanel.replaceChildren(el("h2", {}, t("detail.exports")),
      el("p", { class: "hint" }, t("detail.exports_hint")),
      ...states.map((state) => {
        const name = state.outtype ? `${state.format}-${state.outtype}` : state.format;
        const label = t(`export.${state.format}`, { outtype: state.outtype });
        return el("div", { class: "export-row", "data-format": state.format, "data-export": name, "data-status": state.status },
        el("strong", {}, label),
        state.status === "ready"
          ? el("button", { class: "secondary", onclick: () => save(state.download, `qatune-job-${jobId}-${name}.zip`) },
              t("detail.export_download", { size: megabytes(state.size_bytes) }))
          : state.status === "running"
            ? el("span", {}, progressBar(state.progress * 100, { label }),
                el("span", { class: "hint" }, `${number(state.progress * 100)}% · ${state.message}`))
            : el("button", { class: "secondary", onclick: () => prepare(state.download) },
                state.estimated_bytes ? t("detail.export_prepare_size", { size: megabytes(state.estimated_bytes) }) : t("detail.export_prepare")),
        state.status === "failed" ? alertBox(state.error) : null);
      }));
    exportsPanel.hidden = false;
    if (states.some((state) => state.status === "running")) exportsTimer = setTimeout(() => loadExports().catch(() => {}), 1000);
  }

  async function prepare(url) {
    try {
      const response = await api(url, { raw: true });
      if (!response.ok) throw new Error((await response.json()).detail);
      await loadExports();
    } catch (error) { toast(error.message); }
  }

  function megabytes(bytes) { return number(bytes / 2 ** 20, 1); }
  // A quantized base (QLoRA) is part of how the job computes: said beside its precision.
  function quantized(plan) {
    return plan.quantization && plan.quantization !== "none" ? ` · ${t(`hp.quantization.${plan.quantization}`)}` : "";
  }

  function renderStats() {
    const m = job.metrics || {}, p = job.progress, plan = job.plan || {};
    stats.replaceChildren(...[
      stat("detail.step", p.total_steps ? `${p.step} / ${p.expected_epochs && job.status === "running" ? "~" : ""}${p.total_steps}` : t("common.none"), "stat-step"),
      stat("detail.epoch", number(p.epoch, 2)),
      stat("detail.stops", stops(), "stat-stops"),
      stat("detail.eta", job.status === "running" ? duration(p.eta_seconds) : t("common.none")),
      stat("detail.tokens_s", number(m.tokens_per_second)),
      // Only a finished job has a final loss; any other shows its latest.
      stat(job.status === "succeeded" ? "detail.final_loss" : "detail.last_loss",
        number(m.final_loss ?? m.loss, 4)),
      stat("detail.device", job.device || t("common.none")),
      stat("detail.precision", job.dtype ? job.dtype + quantized(plan) : t("common.none")),
      stat("detail.memory", m.rss_mb ? `${number(m.rss_mb)} MB` : t("common.none")),
      // The high-water mark beside the plan: the figure the planner is held to.
      m.peak_rss_mb ? stat("detail.peak", `${number(m.peak_rss_mb)} MB`) : null,
      plan.estimated_peak_gb !== undefined
        ? stat("detail.plan", `${number(plan.estimated_peak_gb, 2)} / ${number(plan.memory_budget_gb, 1)} GB`) : null,
      // auto epochs: the share of training answers learned so far; training stops at 100%.
      // Once finished: the count, against the target of every one.
      job.outcome && job.outcome.learned != null ? stat("detail.learned", `${job.outcome.learned} / ${job.outcome.examples}`, "stat-learned")
        : m.train_exact_match !== undefined ? stat("detail.learned", `${number(m.train_exact_match * 100, 1)}%`) : null,
      // Question noise: the count above drops words; this one asks the questions as written.
      !job.outcome && m.train_written_match != null
        ? stat("detail.learned_written", `${number(m.train_written_match * 100, 1)}%`, "stat-learned-written") : null,
      // The forgetting meter: general questions the base answered right, still right.
      m.knowledge_known === 0 ? stat("detail.kept", t("detail.kept_nothing"), "stat-kept")
        : m.knowledge_kept !== undefined ? stat("detail.kept", `${m.knowledge_kept} / ${m.knowledge_known}`, "stat-kept")
        : m.knowledge_agreement !== undefined ? stat("detail.kept", `${number(m.knowledge_agreement * 100, 0)}%`, "stat-kept") : null,
      // Without the scope (a merged or GGUF export has none), the adapter answers them all.
      m.knowledge_alone != null && m.knowledge_known ? stat("detail.kept_alone", `${m.knowledge_alone} / ${m.knowledge_known}`, "stat-kept-alone") : null,
      m.eval_exact_match !== undefined ? stat("detail.eval", `${number(m.eval_exact_match * 100, 1)}%`) : null,
      // Fine-tuning a fine-tuned model: where it started.
      job.start_model ? stat("detail.started_from", job.start_model, "stat-started-from") : null,
      job.method === "dpo" ? stat("detail.method", `DPO, β ${job.resolved_hyperparameters?.beta ?? "auto"}`, "stat-method") : null,
      job.method === "reinforcement" ? stat("detail.method", t("detail.method_rl", {
        grader: job.grader?.name ?? "", group: job.resolved_hyperparameters?.group_size ?? "auto",
        beta: job.resolved_hyperparameters?.beta ?? "auto" }), "stat-method") : null,
    ].filter(Boolean));
  }

  function renderJob() {
    title.textContent = `#${job.id} ${job.name}`;
    status.replaceChildren(badge(job.status));
    setProgress(bar, job.progress.percent);
    // Auto epochs end when the data is learned: the length is an estimate, said as one.
    const p = job.progress, estimated = p.expected_epochs && job.status === "running";
    barLabel.textContent = `${p.percent.toFixed(0)}%` + (estimated
      ? ` · ${t("detail.until_learned", { epochs: number(p.expected_epochs, 0) })}`
      : p.total_steps ? ` · ${t("step", { step: p.step, total: p.total_steps })}` : "")
      + (job.status === "running" ? ` · ${t("eta", { eta: duration(job.progress.eta_seconds) })}` : "")
      + (job.jobs_ahead != null ? ` · ${queuePlace(job)}` : "");
    renderStats();
    errorBox.replaceChildren(...(job.status === "failed"
      ? [alertBox(`${t("detail.failed")}: ${job.error}`)]
      : job.outcome && !job.outcome.target_met
        ? [alertBox(`${t("detail.below_target")} ${job.outcome.summary}.`, "warning")]
      : job.status === "running" && job.waiting_for_disk
        ? [alertBox(t("detail.disk_full_running"), "error")]
      : job.status === "paused" ? [job.waiting_for_disk
        ? alertBox(t("detail.disk_full_note", { step: job.checkpoint_step ?? 0 }), "error")
        : alertBox(t("detail.paused_note", { step: job.checkpoint_step ?? 0 }), "info")] : []));
    // What may be done now is the server's to say (job.actions); a stopping job shows the
    // buttons it had, disabled.
    const allowed = new Set(job.actions);
    const stopping = job.status === "running" && (job.pause_requested || job.cancel_requested);
    const buttons = [];
    if (allowed.has("pause") || (stopping && !job.cancel_requested)) {
      buttons.push(el("button", { class: "secondary", id: "pause-job", onclick: () => act("pause"),
        disabled: !allowed.has("pause") }, t("detail.pause")));
    }
    if (allowed.has("resume")) {
      buttons.push(el("button", { id: "resume-job", onclick: () => act("resume") }, t("detail.resume")));
    }
    if (allowed.has("cancel") || stopping) {
      buttons.push(el("button", { class: "danger", id: "cancel-job", onclick: cancel,
        disabled: !allowed.has("cancel") }, t("common.cancel")));
    }
    if (allowed.has("ask")) {
      buttons.push(el("a", { class: "button", href: `#/playground?job=${job.id}` }, t("detail.try")));
      buttons.push(el("button", { class: "secondary", onclick: download }, t("detail.download")));
    }
    if (allowed.has("delete")) {
      buttons.push(el("button", { class: "danger", id: "delete-job", onclick: remove }, t("common.delete")));
    }
    actions.replaceChildren(...buttons);
  }

  let shownCheckpoint;
  async function loadCheckpoints() {
    if (shownCheckpoint === job.checkpoint_step && checkpointList.childElementCount) return;
    shownCheckpoint = job.checkpoint_step;
    const saved = await api(`/jobs/${jobId}/checkpoints`);
    checkpointList.replaceChildren(saved.length
      ? el("ul", { class: "checkpoints" }, saved.map((c) => el("li", { "data-step": c.step },
          `${t("detail.checkpoint_step", { step: c.step })} · ${t("detail.checkpoint_loss", { loss: number(c.train_loss, 4) })} · ${when(c.created_at)} `,
          el("a", { href: `#/playground?job=${jobId}&checkpoint=${c.step}` }, t("detail.ask")))))
      : el("p", { class: "hint" }, t("detail.no_checkpoints")));
  }

  async function act(action) {
    try { job = await api(`/jobs/${jobId}/${action}`, { method: "POST" }); renderJob(); clearTimeout(timer); refresh(); }
    catch (error) { toast(error.message); }
  }

  async function refresh() {
    try {
      job = await api(`/jobs/${jobId}`);
      renderJob();
      loadCheckpoints().catch(() => {});
      loadAnswers().catch(() => { answersShown = false; });
      loadExports().catch(() => {});
      loadEvalPanel().catch(() => {});
      if (job.status === "queued" || job.status === "running") timer = setTimeout(refresh, 2000);
    } catch (error) {
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    }
  }

  function logLine(event) {
    const time = new Date(event.ts).toLocaleTimeString(locale());
    return el("div", { class: event.level, "data-seq": event.seq },
      `${time}  ${t(`level.${event.level}`).padEnd(7)} ${event.message}`);
  }

  async function loadEarlier() {
    try {
      const page = await api(`/jobs/${jobId}/logs?before=${firstShown}&limit=${LOG_PAGE}`);
      log.prepend(...page.events.map(logLine));
      log.scrollTop = 0;  // at the lines asked for; scrolled up, the log stops following (and trimming)
      if (page.events.length) firstShown = page.events[0].seq;
      earlier.hidden = page.events.length < LOG_PAGE;
    } catch (error) { toast(error.message); }
  }

  function redraw() {
    if (drawing) return;
    drawing = true;
    requestAnimationFrame(() => {
      drawing = false;
      if (follow && log.childElementCount > LOG_WINDOW) {  // one scrolled back keeps what they read
        const extra = log.childElementCount - LOG_WINDOW;
        for (let i = 0; i < extra; i++) log.firstElementChild.remove();
        firstShown = Number(log.firstElementChild.dataset.seq);
        earlier.hidden = false;
      }
      if (follow) log.scrollTop = log.scrollHeight;
      if (!plotted) return;  // a frame of log lines only: the charts stay as drawn
      plotted = false;
      chart.replaceChildren(lossChart(losses));
      if (margins.length) marginChart.replaceChildren(lossChart(margins, "margin", t("detail.reward_margin")));
      if (rewards.length) rewardChart.replaceChildren(lossChart(rewards, "reward", t("detail.reward")));
    });
  }

  // A point for a chart; past 2 × CHART_POINTS, each pair of points becomes their mean.
  function plot(points, step, key, value) {
    plotted = true;
    points.push({ step, [key]: value });
    if (points.length <= 2 * CHART_POINTS) return;
    const halved = [];
    for (let i = 0; i + 1 < points.length; i += 2) {
      halved.push({ step: points[i + 1].step, [key]: (points[i][key] + points[i + 1][key]) / 2 });
    }
    if (points.length % 2) halved.push(points[points.length - 1]);
    points.splice(0, points.length, ...halved);
  }

  // The figures beside the DPO and reinforcement charts, from the latest progress event.
  function showFigures(data) {
    if (data.reward_margin != null) {
      marginPanel.hidden = false;
      marginPanel.querySelector("#reward-accuracy").textContent =
        t("detail.reward_accuracy", { share: number(data.reward_accuracy * 100, 0) });
    }
    if (data.reward_mean != null) {
      rewardPanel.hidden = false;
      rewardPanel.querySelector("#reward-figures").textContent = t("detail.reward_figures", {
        step: data.step, reward: number(data.reward_mean, 3),
        spread: number(data.reward_std, 3), kl: number(data.kl, 4) });
    }
  }

  function addEvent(event, live = true) {
    log.append(logLine(event));
    redraw();
    if (event.data && event.data.kind === "reward_eval") {
      rewardPanel.hidden = false;
      rewardPanel.querySelector("#reward-validation").textContent = t("detail.reward_validation", {
        step: event.data.step, reward: number(event.data.reward_mean, 3), prompts: event.data.prompts });
    }
    if (event.data && event.data.kind === "progress" && event.seq > seriesThrough) {
      const data = event.data;
      plot(losses, data.step, "loss", data.loss);
      if (data.reward_margin != null) plot(margins, data.step, "margin", data.reward_margin);
      if (data.reward_mean != null) plot(rewards, data.step, "reward", data.reward_mean);
      showFigures(data);
      // The bar moves with each progress event, not only with the next poll.
      if (live && job && job.status === "running") {
        const { step, total_steps, epoch, eta_seconds, expected_epochs } = data;
        job.progress = { ...job.progress, step, total_steps, epoch, eta_seconds, expected_epochs,
          percent: Math.max(job.progress.percent, total_steps ? (100 * step) / total_steps : 0) };
        renderJob();
      }
    }
  }

  // The curves so far and the log's last page; returns the last event's seq, for the stream.
  async function openLog() {
    const series = await api(`/jobs/${jobId}/series?points=${CHART_POINTS}`);
    for (const p of series.points) {
      if (p.loss != null) losses.push({ step: p.step, loss: p.loss });
      if (p.reward_margin != null) margins.push({ step: p.step, margin: p.reward_margin });
      if (p.reward_mean != null) rewards.push({ step: p.step, reward: p.reward_mean });
    }
    seriesThrough = series.through;
    if (series.latest) showFigures(series.latest);
    const tail = await api(`/jobs/${jobId}/logs?before=${Number.MAX_SAFE_INTEGER}&limit=${LOG_PAGE}`);
    tail.events.forEach((event) => addEvent(event, false));
    redraw();
    if (!tail.events.length) return 0;
    firstShown = tail.events[0].seq;
    earlier.hidden = tail.events.length < LOG_PAGE;
    return tail.events[tail.events.length - 1].seq;
  }

  async function cancel() {
    if (!confirm(t("detail.cancel_confirm"))) return;
    try { job = await api(`/jobs/${jobId}/cancel`, { method: "POST" }); renderJob(); clearTimeout(timer); refresh(); }
    catch (error) { toast(error.message); }
  }

  async function remove() {
    if (!confirm(t("detail.delete_confirm"))) return;
    try { await api(`/jobs/${jobId}`, { method: "DELETE" }); location.hash = "#/jobs"; }
    catch (error) { toast(error.message); }
  }

  function download() { return save(`/jobs/${jobId}/adapter`, `qatune-job-${jobId}-adapter.zip`); }

  async function save(path, filename) {
    try {
      const response = await api(path, { raw: true });
      if (!response.ok) throw new Error((await response.json()).detail);
      const url = URL.createObjectURL(await response.blob());
      const link = el("a", { href: url, download: filename });
      document.body.append(link); link.click(); link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (error) { toast(error.message); }
  }

  refresh();
  openLog().then((after) => streamEvents(`/jobs/${jobId}/logs/stream?after=${after}`, (type, data) => {
    if (type === "log") addEvent(data);
    // An end with a reason is the service stopping, not the job: keep polling.
    if (type === "end") { if (!data.reason) clearTimeout(timer); refresh(); }
  }, controller.signal)).catch((error) => {
    if (error.name !== "AbortError" && error.status !== 401) log.append(el("div", { class: "ERROR" }, error.message));
  });
  return () => { controller.abort(); clearTimeout(timer); clearTimeout(exportsTimer); };
}
