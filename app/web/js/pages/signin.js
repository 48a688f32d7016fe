import { signIn } from "../api.js";
import { t } from "../i18n.js";
import { alertBox, el } from "../ui.js";

export function renderSignIn(main, { expired, onSignedIn }) {
  const error = el("div");
  const username = el("input", { id: "username", name: "username", autocomplete: "username", required: true });
  const password = el("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true });
  const submit = el("button", { type: "submit" }, t("signin.submit"));
  const form = el("form", { class: "panel signin", "aria-labelledby": "signin-title" },
    el("span", { class: "brand" }, "qatune"),
    el("h1", { id: "signin-title" }, t("signin.title")),
    expired ? alertBox(t("signin.expired"), "info") : null,
    error,
    el("div", { class: "field" }, el("label", { for: "username" }, t("signin.username")), username),
    el("div", { class: "field" }, el("label", { for: "password" }, t("signin.password")), password),
    submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    error.replaceChildren();
    try {
      await signIn(username.value, password.value,
        (bits) => error.replaceChildren(alertBox(t("signin.working", { bits }), "info")));
      await onSignedIn();
    } catch (failure) {
      // The server's words: a wrong password, a wait, a disabled account.
      error.replaceChildren(alertBox(failure.status ? failure.message : t("signin.failed")));
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  main.replaceChildren(form);
  username.focus();
}
