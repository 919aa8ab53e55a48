// toolshim console: plain JavaScript, no build step, talks only to this origin.
"use strict";

const KEY_SLOT = "toolshim.apiKey";
const state = { view: "models", models: null, requests: [], selected: null, samples: {} };
const $ = (id) => document.getElementById(id);

// --- DOM helpers: text only, never HTML from the server ---------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
// Words a screen reader (and textContent) would otherwise run together ("emulateexact"):
// a space between every two pieces that sit side by side in one cell.
function spaced(...children) {
  const kept = children.flat().filter((c) => c !== null && c !== undefined && c !== false && c !== "");
  return kept.flatMap((c, i) => (i ? [" ", c] : [c]));
}
const badge = (text, cls) => h("span", { class: "badge " + (cls || "") }, text);
const pretty = (value) => typeof value === "string" ? value : JSON.stringify(value, null, 2);
const ms = (v) => (v === null || v === undefined) ? "–" : `${Number(v).toFixed(v < 10 ? 2 : 1)} ms`;

// --- API ---------------------------------------------------------------------
class AuthError extends Error {}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  const key = sessionStorage.getItem(KEY_SLOT);
  if (key) headers.authorization = "Bearer " + key;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET", headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (response.status === 401) throw new AuthError(body?.error?.message || "unauthorized");
  if (!response.ok) throw new Error(body?.error?.message || `HTTP ${response.status}`);
  return body;
}

function flash(text, kind) {
  const el = $("flash");
  el.textContent = text;
  el.className = "banner " + (kind || "");
  el.hidden = false;
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => { el.hidden = true; }, 6000);
}

// --- login -------------------------------------------------------------------
function showLogin(message) {
  for (const v of document.querySelectorAll(".view")) v.hidden = true;
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
  $("api-key").focus();
}

async function tryLogin(event) {
  event.preventDefault();
  sessionStorage.setItem(KEY_SLOT, $("api-key").value.trim());
  try {
    await api("/admin/models");
  } catch (err) {
    sessionStorage.removeItem(KEY_SLOT);
    showLogin(err instanceof AuthError ? "That key was not accepted." : err.message);
    return;
  }
  $("api-key").value = "";
  start();
}

// --- navigation --------------------------------------------------------------
function route() {
  const wanted = (location.hash || "#models").slice(1);
  state.view = ["models", "requests", "bench"].includes(wanted) ? wanted : "models";
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === state.view);
  }
  for (const name of ["models", "requests", "bench"]) $("view-" + name).hidden = name !== state.view;
  refresh();
}

async function refresh() {
  try {
    if (state.view === "models") await loadModels();
    else if (state.view === "requests") await loadRequests();
    else await loadBench();
  } catch (err) {
    if (err instanceof AuthError) { sessionStorage.removeItem(KEY_SLOT); showLogin(); return; }
    flash(err.message, "error");
  }
}

function showReloadError(error) {
  $("reload-error").hidden = !error;
  $("reload-error-text").textContent = error || "";
}

// --- models ------------------------------------------------------------------
async function loadModels() {
  const data = await api("/admin/models");
  state.models = data;
  showReloadError(data.last_reload_error);
  $("status-line").textContent = `${data.file} · version ${data.generation}`;
  const rows = [];
  for (const model of data.models) rows.push(...modelRows(model));
  $("models-table").tBodies[0].replaceChildren(...rows);
  $("models-empty").hidden = data.models.length > 0;
  const learned = data.models.filter((m) => m.learned).length;
  const validated = data.models.filter((m) => m.validation).length;
  $("models-summary").textContent =
    `${data.models.length} models · ${learned} with learned entries · ${validated} validated` +
    (data.min_validation !== null ? ` · min validation ${data.min_validation}` : "");
}

function sourceBadge(source) {
  const el = badge(source.kind === "glob" ? source.label : source.kind, "src-" + source.kind);
  el.title = source.kind === "exact" ? `models: "${source.label}"` : source.label;
  return el;
}

function validationBadge(v, min) {
  if (!v) return h("span", { class: "muted" }, "not validated");
  const ratio = v.passed / v.total;
  const cls = ratio >= 1 ? "ok" : ratio >= (min ?? 0.8) ? "warn" : "bad";
  const title = v.failed.length ? "failed: " + v.failed.join(", ") : "all checks passed";
  const el = badge(`${v.passed}/${v.total}`, cls);
  el.title = `${title} · ${v.at}` + (v.rung ? ` · rung ${v.rung}` : "");
  return h("span", {}, spaced(el, v.failed.length ? h("span", { class: "muted small-text" },
    v.failed.join(", ")) : null));
}

function counterCells(c) {
  if (!c) return [h("td", { class: "num muted" }, "0"), h("td", { class: "muted" }, "–"),
    h("td", { class: "num muted" }, "–"), h("td", { class: "num muted" }, "–")];
  return [
    h("td", { class: "num" }, c.requests + (c.errors ? ` (${c.errors} err)` : "")),
    h("td", { class: "counts" }, spaced(
      h("span", { class: "c-pass", title: "passed untouched" }, `✓ ${c.calls_passed}`),
      h("span", { class: "c-rep", title: "repaired" }, `⟳ ${c.calls_repaired}`),
      h("span", { class: "c-drop", title: "dropped" }, `✗ ${c.calls_dropped}`),
      h("span", { class: "c-rec", title: "recovered from text" }, `↺ ${c.calls_recovered}`),
      c.corrections_tried ? h("span", { class: "c-rep", title: "corrections that worked / asked" },
        `✎ ${c.corrections_succeeded}/${c.corrections_tried}`) : null)),
    h("td", { class: "num" }, `${c.refusals} / ${c.retries}`),
    h("td", { class: "num" }, ms(c.p50_overhead_ms)),
  ];
}

function modelRows(model) {
  const open = state.selected === model.name;
  const toolsSource = model.sources.tools;
  const actions = h("td", { class: "actions" }, spaced(
    h("button", { class: "small", onclick: (e) => { e.stopPropagation(); validate(model.name, e.target); } },
      "Validate"),
    model.promotable ? h("button", { class: "small", title: "move into models: (your section)",
      onclick: (e) => { e.stopPropagation(); editLearned(model.name, "promote"); } }, "Promote") : null,
    model.learned ? h("button", { class: "small danger", title: "remove from learned:",
      onclick: (e) => { e.stopPropagation(); editLearned(model.name, "forget"); } }, "Forget") : null));
  const row = h("tr", { class: "model-row" + (open ? " selected" : ""), "data-model": model.name,
    onclick: () => { state.selected = open ? null : model.name; loadModels(); } },
    h("td", { class: "name" }, spaced(model.name, h("span", { class: "sub" },
      [...model.known_from, model.upstream].filter(Boolean).join(" · ")))),
    h("td", {}, spaced(badge(model.tools, "mode-" + model.tools), sourceBadge(toolsSource))),
    h("td", {}, model.tool_format ? spaced(model.tool_format,
      sourceBadge(model.sources.tool_format)) : h("span", { class: "muted" }, "–")),
    h("td", { class: "validation" }, validationBadge(model.validation, state.models?.min_validation)),
    ...counterCells(model.counters),
    actions);
  if (!open) return [row];
  return [row, h("tr", { class: "fields-row" }, h("td", { colspan: 9 }, modelFields(model)))];
}

function human(key, value) {
  if (value === null || value === undefined) return "none";
  if (key === "rename" && Array.isArray(value)) {
    return value.length ? value.map(([a, b]) => `${a} → ${b}`).join(", ") : "none";
  }
  if (Array.isArray(value)) return value.length ? value.join(", ") : "none";
  if (typeof value === "object") {
    const set = Object.entries(value).filter(([, v]) => v !== null && v !== false &&
      !(Array.isArray(v) && !v.length));
    return set.length ? set.map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`)
      .join("; ") : "none";
  }
  return String(value);
}

function modelFields(model) {
  const fields = Object.entries(model.profile).map(([key, value]) =>
    h("div", { class: "field" + (model.sources[key].kind === "built-in" ? " default" : "") },
      spaced(h("span", { class: "k" }, key), h("span", { class: "v" }, human(key, value)),
        sourceBadge(model.sources[key]))));
  const parts = [h("div", { class: "fields" }, fields)];
  if (model.learned) {
    parts.push(h("h2", { class: "gap" }, "Learned entry"),
      h("dl", { class: "kv" }, Object.entries(model.learned).flatMap(([k, v]) =>
        [h("dt", {}, k), h("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v))])));
  }
  return parts;
}

async function validate(model, button) {
  button.disabled = true;
  button.textContent = "Running…";
  try {
    const result = await api("/admin/validate", { method: "POST", body: { model } });
    const failed = result.checks.filter((c) => !c.passed).map((c) => `${c.name}: ${c.reason}`);
    flash(`${model}: ${result.passed}/${result.total} checks passed` +
      (failed.length ? " · " + failed.join(" · ") : ""), failed.length ? "error" : "ok");
  } catch (err) {
    flash(`${model}: validation failed to run: ${err.message}`, "error");
  }
  await loadModels();
}

async function editLearned(model, action) {
  const what = action === "promote"
    ? `Move the learned entry for ${model} into models: (your section)?`
    : `Remove ${model} from learned:? toolshim may learn it again.`;
  if (!confirm(what)) return;
  try {
    await api(`/admin/learned/${encodeURIComponent(model)}/${action}`, { method: "POST" });
    flash(`${model}: ${action === "promote" ? "promoted to models:" : "forgotten"}`, "ok");
  } catch (err) {
    flash(`${model}: ${err.message}`, "error");
  }
  await loadModels();
}

// --- requests ----------------------------------------------------------------
async function loadRequests() {
  const data = await api("/admin/requests");
  state.requests = data.requests;
  $("requests-summary").textContent = `last ${data.requests.length} of up to ${data.capacity}` +
    (data.prompts_shown ? " · prompts kept (--log-prompts)"
      : data.prompts_kept ? " · prompts kept, shown only with an admin key (--admin-key)" : "");
  $("requests-table").tBodies[0].replaceChildren(...data.requests.map(requestRow));
  $("requests-empty").hidden = data.requests.length > 0;
  const chosen = data.requests.find((r) => r.request_id === state.selectedRequest);
  if (chosen) showRequest(chosen); else $("request-detail").hidden = true;
}

function statusBadge(status) {
  const cls = status >= 500 ? "bad" : status >= 400 ? "warn" : "ok";
  return badge(String(status), cls);
}

function changeBadges(r) {
  const out = [];
  if (r.tools_stripped) out.push(badge(`${r.tools_stripped} stripped`, "warn"));
  if (r.calls_dropped) out.push(badge(`${r.calls_dropped} dropped`, "bad"));
  if (r.calls_repaired) out.push(badge(`${r.calls_repaired} repaired`, "warn"));
  if (r.calls_recovered) out.push(badge(`${r.calls_recovered} recovered`, "ok"));
  if (!out.length && r.calls_kept) {
    out.push(badge(`${r.calls_kept} call${r.calls_kept > 1 ? "s" : ""}`, ""));
  }
  return out.length ? out : [h("span", { class: "muted" }, "–")];
}

// What a request was for: the dialect's name, else the /v1/ path it was passed through.
const ENDPOINTS = { "chat.completions": "chat", "responses": "responses",
  "responses.retrieve": "responses (get)", "responses.delete": "responses (delete)" };
function endpointLabel(endpoint) {
  return ENDPOINTS[endpoint] || (endpoint ? "/v1/" + endpoint : "–");
}

function requestRow(r) {
  return h("tr", { class: r.request_id === state.selectedRequest ? "selected" : "",
    onclick: () => { state.selectedRequest = r.request_id; loadRequests(); } },
    h("td", { class: "muted" }, new Date(r.at * 1000).toLocaleTimeString()),
    h("td", {}, endpointLabel(r.endpoint)),
    h("td", { class: "name" }, r.model ? spaced(r.model, r.stream ? h("span", { class: "sub" }, "stream") : null)
      : h("span", { class: "muted" }, "–")),
    h("td", {}, statusBadge(r.status)),
    h("td", {}, r.rung ? badge(r.rung, "mode-" + r.rung.split("-")[0]) : h("span", { class: "muted" }, "–")),
    h("td", { class: "num" }, r.retries || "–"),
    h("td", {}, changeBadges(r)),
    h("td", { class: "num" }, ms(r.overhead_ms)),
    h("td", { class: "num" }, ms(r.upstream_ms)));
}

function showRequest(r) {
  const skip = new Set(["notes", "prompt", "changes"]);
  const pairs = Object.entries(r).filter(([k, v]) => !skip.has(k) && v !== null && v !== "");
  const box = $("request-detail");
  const shown = (k, v) => k === "at" ? new Date(v * 1000).toISOString()
    : k.endsWith("_ms") ? ms(v) : String(v);
  box.replaceChildren(...[
    h("h2", {}, "Request"), h("p", { class: "mono-id" }, r.request_id),
    h("dl", { class: "kv" }, pairs.filter(([k]) => k !== "request_id").flatMap(([k, v]) =>
      [h("dt", {}, k.replaceAll("_", " ")), h("dd", {}, shown(k, v))])),
    h("h2", {}, "Notes"),
    r.notes.length ? r.notes.map((n) => h("div", { class: "note" },
      badge(n.kind.replaceAll("_", " "), "warn"), noteText(n.detail)))
      : h("p", { class: "muted" }, "No tools stripped, no calls dropped, repaired or recovered."),
    r.prompt ? [h("h2", {}, "Prompt"), h("pre", {}, pretty(r.prompt))] : null,
  ].flat().filter(Boolean));
  box.hidden = false;
}

// --- bench -------------------------------------------------------------------
async function loadBench() {
  if (!Object.keys(state.samples).length) {
    state.samples = (await api("/admin/bench")).sample_tools;
    $("bench-tools").append(...Object.entries(state.samples).map(([key, tool]) =>
      h("label", { title: tool.function.description },
        h("input", { type: "checkbox", value: key, checked: key === "weather" }), key)));
  }
  if (!state.models) state.models = await api("/admin/models");
  const select = $("bench-model");
  const current = select.value;
  select.replaceChildren(...state.models.models.map((m) =>
    h("option", { value: m.name, selected: m.name === current }, m.name)));
}

async function runBench(event) {
  event.preventDefault();
  const body = {
    model: $("bench-model").value, prompt: $("bench-prompt").value,
    stream: $("bench-stream").checked,
    sample_tools: [...document.querySelectorAll("#bench-tools input:checked")].map((i) => i.value),
  };
  const pasted = $("bench-tools-json").value.trim();
  $("bench-error").hidden = true;
  if (pasted) {
    try { body.tools = JSON.parse(pasted); } catch (err) {
      $("bench-error").textContent = "Tools JSON does not parse: " + err.message;
      $("bench-error").hidden = false;
      return;
    }
  }
  $("bench-run").disabled = true;
  $("bench-run").textContent = "Running…";
  try {
    showBench(await api("/admin/bench", { method: "POST", body }));
  } catch (err) {
    $("bench-error").textContent = err.message;
    $("bench-error").hidden = false;
  } finally {
    $("bench-run").disabled = false;
    $("bench-run").textContent = "Run";
  }
}

function noteText(detail) {
  return Object.entries(detail).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`)
    .join(" · ");
}

function showBench(result) {
  const got = result.client_got;
  const upstream = result.upstream_sent;
  const last = upstream[upstream.length - 1];
  const rewritten = last !== undefined &&
    JSON.stringify(last) !== JSON.stringify(result.client_sent);
  $("pane-client-sent").textContent = pretty(result.client_sent);
  const clientLines = new Set(pretty(result.client_sent).split("\n"));
  $("pane-upstream-sent").replaceChildren(...(upstream.length ? upstream.flatMap((b, i) => [
    upstream.length > 1 ? h("span", { class: "attempt" }, `// attempt ${i + 1}\n`) : null,
    ...pretty(b).split("\n").map((line) => h("span",
      { class: clientLines.has(line) ? "line" : "line diff-add" }, line)),
    h("span", { class: "line" }, "")]).filter(Boolean) : ["(nothing was sent upstream)"]));
  $("pane-rewritten").replaceChildren(upstream.length
    ? badge(rewritten ? "rewritten" : "unchanged", rewritten ? "warn" : "ok") : "");
  $("pane-upstream-raw").textContent = result.upstream_answers.length
    ? result.upstream_answers.map((a) => `// HTTP ${a.status}\n${a.body}`).join("\n\n")
    : "(no answer)";
  $("pane-client-got").textContent = `// HTTP ${got.status}\n` + pretty(got.body);
  const headers = Object.entries(got.headers).filter(([k]) => k !== "x-toolshim-overhead-ms");
  $("bench-notes").replaceChildren(...[
    h("strong", {}, "Notes"), statusBadge(got.status),
    headers.map(([k, v]) => badge(`${k.replace("x-toolshim-", "")}: ${v}`, "info")),
    badge(`overhead ${got.headers["x-toolshim-overhead-ms"] || "?"} ms`, ""),
    rewritten ? badge("request rewritten for this model", "warn") : null,
    result.notes.map((n) => h("span", { class: "note-inline" },
      badge(n.kind.replaceAll("_", " "), "warn"), " ", noteText(n.detail))),
    !rewritten && !result.notes.length
      ? h("span", { class: "muted" }, "nothing was changed on the way") : null,
  ].flat().filter(Boolean));
  $("bench-result").hidden = false;
}

// --- start -------------------------------------------------------------------
function start() {
  $("login").hidden = true;
  $("nav").hidden = false;
  $("logout").hidden = !sessionStorage.getItem(KEY_SLOT);
  route();
  clearInterval(start.timer);
  start.timer = setInterval(() => { if (state.view === "requests") refresh(); }, 3000);
}

document.addEventListener("DOMContentLoaded", async () => {
  $("login-form").addEventListener("submit", tryLogin);
  $("bench-form").addEventListener("submit", runBench);
  $("models-refresh").addEventListener("click", () => loadModels().catch((e) => flash(e.message, "error")));
  $("requests-refresh").addEventListener("click", () => loadRequests().catch((e) => flash(e.message, "error")));
  $("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY_SLOT); showLogin(); });
  window.addEventListener("hashchange", route);
  try {
    await api("/admin/models");
    start();
  } catch (err) {
    if (err instanceof AuthError) showLogin(); else { start(); flash(err.message, "error"); }
  }
});
