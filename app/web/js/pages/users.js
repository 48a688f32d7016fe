import { api } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el, toast, when } from "../ui.js";

export function renderUsers(main, { user }) {
  if (!user.is_admin) { location.hash = "#/jobs"; return; }
  const list = el("div", {}, el("p", { class: "loading" }, t("common.loading")));
  const username = el("input", { id: "new-username", required: true, minlength: 3, maxlength: 64, autocomplete: "off" });
  const password = el("input", { id: "new-password", type: "password", required: true, minlength: 8, autocomplete: "new-password" });
  const admin = el("input", { id: "new-admin", type: "checkbox" });
  const errorBox = el("div");
  const form = el("form", { class: "panel" }, el("h2", {}, t("users.create")), errorBox,
    el("div", { class: "form-grid" },
      el("div", { class: "field" }, el("label", { for: "new-username" }, t("signin.username")), username),
      el("div", { class: "field" }, el("label", { for: "new-password" }, t("signin.password")), password)),
    el("div", { class: "field" }, el("label", { for: "new-admin" }, admin, " ", t("users.admin"))),
    el("button", { type: "submit" }, t("users.create")));
  main.append(el("h1", {}, t("users.title")), list, form);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.replaceChildren();
    try {
      const created = await api("/users", { method: "POST",
        json: { username: username.value, password: password.value, is_admin: admin.checked } });
      toast(t("users.created", { name: created.username }));
      form.reset();
      load();
    } catch (error) {
      if (error.status !== 401) errorBox.replaceChildren(alertBox(error.message));
    }
  });

  // Each user's row: disable or enable (at once: their tokens and keys stop), a new
  // password (their tokens stop), delete with all they own. Not for one's own row.
  async function act(u, action) {
    try {
      if (action === "toggle") {
        await api(`/users/${u.id}`, { method: "PATCH", json: { disabled: !u.disabled } });
        toast(t(u.disabled ? "users.enabled" : "users.disabled", { name: u.username }));
      } else if (action === "password") {
        const chosen = prompt(t("users.password_prompt", { name: u.username }));
        if (!chosen) return;
        await api(`/users/${u.id}/password`, { method: "POST", json: { new_password: chosen } });
        toast(t("users.password_set", { name: u.username }));
      } else if (action === "delete") {
        if (!confirm(t("users.delete_confirm", { name: u.username }))) return;
        await api(`/users/${u.id}`, { method: "DELETE" });
        toast(t("users.deleted", { name: u.username }));
      }
      load();
    } catch (error) {
      if (error.status !== 401) toast(error.message);
    }
  }

  function actions(u) {
    if (u.id === user.id) return el("td", {});
    const button = (action, label, kind = "secondary") =>
      el("button", { class: kind, "data-action": action, onclick: () => act(u, action) }, label);
    return el("td", {}, el("div", { class: "row-actions" },
      button("toggle", t(u.disabled ? "users.enable" : "users.disable")),
      button("password", t("users.reset_password")),
      button("delete", t("users.delete"), "danger")));
  }

  async function load() {
    const users = await api("/users");
    list.replaceChildren(el("div", { class: "table-wrap" }, el("table", { id: "users-table" },
      el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, t("signin.username")),
        el("th", {}, t("users.admin")), el("th", {}, t("users.state")), el("th", {}, t("common.created")),
        el("th", {}, ""))),
      el("tbody", {}, users.map((u) => el("tr", { "data-user": u.username },
        el("td", { class: "num" }, u.id), el("td", {}, u.username),
        el("td", {}, u.is_admin ? "✓" : ""),
        el("td", { class: "state" }, t(u.disabled ? "users.state_disabled" : "users.state_active")),
        el("td", {}, when(u.created_at)), actions(u)))))));
  }
  load().catch((error) => list.replaceChildren(alertBox(error.message)));
}
