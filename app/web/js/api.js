// The REST API, with the session's token and the language the user chose (the server's
// errors and sentences come back in it). A 401 sends the user back to sign in.
import { locale } from "./i18n.js";
import { solve } from "./proof_of_work.js";

const TOKEN_KEY = "qatune.token";

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.detail || body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.errors = body?.errors || [];
  }
}

export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  set token(value) { value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY); },
  onExpired: () => {},
};

export async function api(path, { method = "GET", json, form, raw = false, signal } = {}) {
  const headers = { "Accept-Language": locale() };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  let body;
  if (json !== undefined) { headers["Content-Type"] = "application/json"; body = JSON.stringify(json); }
  if (form !== undefined) body = form;
  const response = await fetch(path, { method, headers, body, signal });
  if (response.status === 401 && path !== "/auth/token") {
    session.token = null;
    session.onExpired();
    throw new ApiError(401, { detail: "expired" });
  }
  if (raw) return response;
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Signing in; an account under a guessing attack asks for a proof of work first (a 429
// with a challenge), found here and sent with the same password: onWorking(bits) says so.
export async function signIn(username, password, onWorking) {
  let form = new URLSearchParams({ username, password });
  for (let round = 0; round < 2; round++) {
    const response = await fetch("/auth/token", { method: "POST", body: form, headers: { "Accept-Language": locale() } });
    const data = await response.json().catch(() => ({}));
    const challenge = response.headers.get("X-Qatune-Challenge");
    if (response.status === 429 && challenge && round === 0) {
      const bits = Number(response.headers.get("X-Qatune-Work-Bits"));
      if (onWorking) onWorking(bits);
      const proof = await solve(challenge, bits);
      form = new URLSearchParams({ username, password, challenge, proof });
      continue;
    }
    if (!response.ok) throw new ApiError(response.status, data);
    session.token = data.access_token;
    return data;
  }
}

// Server-sent events over fetch, so the token travels in a header, not in the URL:
// onBlock(type, data) for each event, its data lines joined.
async function readEvents(response, onBlock) {
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => ({})));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let type = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) type = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onBlock(type, data);
    }
  }
}

export async function streamEvents(path, onEvent, signal) {
  const response = await api(path, { raw: true, signal });
  await readEvents(response, (type, data) => onEvent(type, JSON.parse(data)));
}

// A chat answer from /v1/chat/completions, streamed: onText gets each new piece of text.
export async function streamChat(model, messages, options, onText, signal) {
  const response = await api("/v1/chat/completions", {
    method: "POST", raw: true, signal, json: { model, messages, stream: true, ...options },
  });
  await readEvents(response, (_, data) => {
    if (data === "[DONE]") return;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new ApiError(503, chunk);
    const text = chunk.choices?.[0]?.delta?.content;
    if (text) onText(text);
  });
}
