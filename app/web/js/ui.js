// Small DOM helpers. Text always goes in as textContent: model output and dataset content
// can never become HTML.
import { locale, t } from "./i18n.js";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function svg(tag, attrs = {}) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

export function badge(status) {
  return el("span", { class: `badge ${status}`, "data-status": status }, t(`status.${status}`));
}

export function progressBar(percent, { big = false, label } = {}) {
  const bar = el("div", {
    class: `progress${big ? " big" : ""}`, role: "progressbar",
    "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(Math.round(percent)),
    "aria-label": label || t("jobs.progress"),
  }, el("span", { style: `width:${Math.max(0, Math.min(100, percent))}%` }));
  return bar;
}

export function setProgress(bar, percent) {
  bar.setAttribute("aria-valuenow", String(Math.round(percent)));
  bar.firstChild.style.width = `${Math.max(0, Math.min(100, percent))}%`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return t("common.none");
  const s = Math.round(seconds);
  if (s < 60) return t("time.s", { s });
  if (s < 3600) return t("time.ms", { m: Math.floor(s / 60), s: s % 60 });
  return t("time.hm", { h: Math.floor(s / 3600), m: Math.floor((s % 3600) / 60) });
}

// A queued job's place in the line (the server's: a turn per user in rotation), and about
// when it starts, rounded as an estimate is (to 10 s, past ten minutes to the minute).
export function queuePlace(job) {
  if (job.jobs_ahead == null) return "";
  const place = job.jobs_ahead === 0 ? t("queue.next") : t("queue.ahead", { count: job.jobs_ahead });
  const seconds = job.starts_in_seconds;
  if (!seconds) return place;
  const step = seconds < 600 ? 10 : 60;
  return t("queue.starts", { place, time: duration(Math.max(step, Math.round(seconds / step) * step)) });
}

export function when(iso) {
  if (!iso) return t("common.none");
  return new Date(iso).toLocaleString(locale());
}

export function number(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return t("common.none");
  return Number(value).toLocaleString(locale(), { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function toast(message) {
  const box = document.getElementById("toast");
  const item = el("div", {}, message);
  box.append(item);
  setTimeout(() => item.remove(), 4000);
}

export function alertBox(message, kind = "error") {
  return el("div", { class: `alert ${kind}`, role: kind === "error" ? "alert" : "status" }, message);
}

export function problemList(error) {
  const items = (error.errors || []).map((p) => {
    let where = p.line ? t("datasets.line", { n: p.line }) : p.item ? t("datasets.item", { n: p.item }) : "";
    if (p.sheet) where = t("datasets.sheet", { sheet: p.sheet, where });
    const field = p.field ? ` [${p.field}]` : "";
    return el("li", {}, `${where}${field}: ${p.message}`);
  });
  return el("div", { class: "problems", role: "alert" },
    el("h3", {}, t(items.length > 1 ? "datasets.rejected" : "datasets.rejected_one", { n: items.length || 1 })),
    el("p", {}, error.message),
    items.length ? el("ol", {}, items) : null);
}

export function stat(key, value, id) {
  return el("div", { class: "stat" }, el("div", { class: "k" }, t(key)), el("div", { class: "v", id }, value));
}

// The loss curve, drawn by the page: an SVG polyline with a min/max axis.
// A line over the steps: the loss, or (key, label) another figure of each step.
export function lossChart(points, key = "loss", label = t("detail.loss")) {
  const width = 600, height = 220, pad = 34;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  root.append(svg("line", { class: "axis", x1: pad, y1: height - pad, x2: width - 8, y2: height - pad }));
  root.append(svg("line", { class: "axis", x1: pad, y1: 8, x2: pad, y2: height - pad }));
  if (points.length < 2) return root;
  const maxStep = Math.max(...points.map((p) => p.step));
  const losses = points.map((p) => p[key]);
  const lo = Math.min(...losses), hi = Math.max(...losses);
  const x = (s) => pad + ((width - pad - 8) * s) / maxStep;
  const y = (v) => 8 + (height - pad - 8) * (1 - (v - lo) / (hi - lo || 1));
  root.append(svg("polyline", { class: "line", points: points.map((p) => `${x(p.step)},${y(p[key])}`).join(" ") }));
  for (const [value, yy] of [[hi, y(hi)], [lo, y(lo)]]) {
    const label = svg("text", { x: 2, y: yy + 4 }); label.textContent = value.toFixed(2); root.append(label);
  }
  const last = svg("text", { x: width - 40, y: height - 12 }); last.textContent = String(maxStep); root.append(last);
  return root;
}
