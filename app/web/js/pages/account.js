// Your account: change the password (every earlier sign-in ends), and API keys for scripts.
import { api, session } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el, toast, when } from "../ui.js";

export function renderAccount(main) {
  const current = el("input", { id: "current-password", type: "password", autocomplete: "current-password", required: true });
  const fresh = el("input", { id: "new-password", type: "password", autocomplete: "new-password", minlength: 8, required: true });
  const passwordBox = el("div");
  const passwordForm = el("form", { class: "panel", id: "password-form" },
    el("h2", {}, t("account.password")), passwordBox,
    el("div", { class: "form-grid" },
      el("div", { class: "field" }, el("label", { for: "current-password" }, t("account.current")), current),
      el("div", { class: "field" }, el("label", { for: "new-password" }, t("account.new")), fresh,
        el("p", { class: "hint" }, t("account.password_hint")))),
    el("button", { type: "submit" }, t("account.password")));

  const keyName = el("input", { id: "key-name", maxlength: 100, required: true });
  const keyBox = el("div", { id: "new-key" });
  const keyList = el("div", { id: "api-keys" });
  const keyForm = el("form", { class: "panel", id: "key-form" },
    el("h2", {}, t("account.keys")), el("p", { class: "hint" }, t("account.keys_hint")),
    el("div", { class: "field" }, el("label", { for: "key-name" }, t("account.key_name")), keyName),
    el("button", { type: "submit" }, t("account.create_key")), keyBox, el("br"), keyList);

  main.append(el("h1", {}, t("account.title")), keyForm, passwordForm);

  passwordForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    passwordBox.replaceChildren();
    try {
      await api("/auth/password", { method: "POST", json: { current_password: current.value, new_password: fresh.value } });
      toast(t("account.changed"));
      session.token = null;
      session.onExpired();
    } catch (error) {
      if (error.status !== 401 || error.message !== "expired") passwordBox.replaceChildren(alertBox(error.message));
    }
  });

  keyForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api("/api-keys", { method: "POST", json: { name: keyName.value.trim() } });
      const secret = el("code", { class: "secret", id: "key-secret" }, made.key);
      keyBox.replaceChildren(alertBox(t("account.key_once"), "info"), secret);
      keyForm.querySelector("button").blur();
      keyName.value = "";
      loadKeys();
    } catch (error) {
      if (error.status !== 401) keyBox.replaceChildren(alertBox(error.message));
    }
  });

  async function loadKeys() {
    const keys = await api("/api-keys");
    if (!keys.length) { keyList.replaceChildren(el("p", { class: "hint" }, t("account.no_keys"))); return; }
    keyList.replaceChildren(el("div", { class: "table-wrap" }, el("table", { id: "keys-table" },
      el("thead", {}, el("tr", {}, el("th", {}, t("common.name")), el("th", {}, t("account.prefix")),
        el("th", {}, t("common.created")), el("th", {}, t("account.last_used")), el("th", {}, ""))),
      el("tbody", {}, keys.map((k) => el("tr", { "data-key": k.id },
        el("td", {}, k.name), el("td", {}, el("code", {}, `${k.prefix}…`)),
        el("td", {}, when(k.created_at)), el("td", { class: "last-used" }, k.last_used_at ? when(k.last_used_at) : t("account.never")),
        el("td", {}, el("button", { class: "danger", onclick: async () => {
          if (!confirm(t("account.revoke_confirm"))) return;
          try { await api(`/api-keys/${k.id}`, { method: "DELETE" }); loadKeys(); }
          catch (error) { toast(error.message); }
        } }, t("account.revoke")))))))));
  }
  loadKeys().catch((error) => keyList.replaceChildren(alertBox(error.message)));
}
