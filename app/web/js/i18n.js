// English and Simplified Chinese: each language's words are data, in ../i18n/<lang>.json.
// The choice is remembered in localStorage.
const LANGS = ["en", "zh"];
const STRINGS = Object.fromEntries(await Promise.all(LANGS.map(async (code) => {
  const response = await fetch(new URL(`../i18n/${code}.json`, import.meta.url));
  return [code, await response.json()];
})));

let lang = localStorage.getItem("qatune.lang") || (navigator.language.startsWith("zh") ? "zh" : "en");

export function t(key, vars = {}) {
  const text = STRINGS[lang][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

export function getLang() { return lang; }

// Dates and numbers in the chosen language's conventions, not the browser's.
export function locale() { return lang === "zh" ? "zh-CN" : "en-GB"; }

export function setLang(next) {
  lang = STRINGS[next] ? next : "en";
  localStorage.setItem("qatune.lang", lang);
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  translateStatic();
}

export function translateStatic(root = document) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll("[data-i18n-label]")) node.setAttribute("aria-label", t(node.dataset.i18nLabel));
}
