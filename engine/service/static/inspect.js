// The tiermem inspector: plain JavaScript over the service's /v1 API, no build step.
// Every value is written with textContent (el() below), never as HTML: a memory's text is
// whatever a user said, and must not run here.
"use strict";

const API = new URL("v1/", window.location.href);
const KEY_SLOT = "tiermem-inspector-key";
const OPS = { ADD: "created", MERGE: "merged", SUPERSEDE: "superseded", UPDATE: "updated", DELETE: "deleted" };
const ORIGINS = { hit: "the hit", part: "part of the hit", later: "later statement" };
const state = { key: null, info: null, user: null, entries: [] };

function $(id) { return document.getElementById(id); }

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (name === "class") node.className = value;
    else if (name === "data") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function when(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  return at.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }) + " UTC";
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

async function api(method, path, params, body) {
  const url = new URL(path, API);
  for (const [name, value] of Object.entries(params || {})) url.searchParams.set(name, value);
  const headers = { Authorization: "Bearer " + state.key };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = response.status === 204 ? null : await response.json();
  if (!response.ok) {
    if (response.status === 401) signOut();
    const error = new Error((data && data.error && data.error.message) || "HTTP " + response.status);
    error.status = response.status;
    throw error;
  }
  return data;
}

function guarded(action) {
  return async (event) => {
    if (event) event.preventDefault();
    showError("");
    try { await action(event); } catch (error) { showError(error.message); }
  };
}

// -- the key ---------------------------------------------------------------------------------
function takeKeyFromFragment() {
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  if (fragment.get("key")) {
    sessionStorage.setItem(KEY_SLOT, fragment.get("key"));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
}

function signOut() {
  sessionStorage.removeItem(KEY_SLOT);
  state.key = null;
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("who").hidden = true;
  $("sign-in").hidden = false;
}

async function start() {
  state.key = sessionStorage.getItem(KEY_SLOT);
  if (!state.key) { signOut(); return; }
  state.info = await api("GET", "inspect/users");
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = state.info.tenant ? "tenant " + state.info.tenant : "embedded data directory";
  $("who").hidden = false;
  $("read-only").hidden = !state.info.read_only;
  showUsers();
}

function showUsers() {
  const list = $("users");
  list.replaceChildren(...state.info.users.map((user) =>
    el("li", {}, el("button", { type: "button", data: { user }, class: user === state.user ? "current" : "", onclick: guarded(() => openUser(user)) }, user))));
  if (!state.info.users.length) list.append(el("li", { class: "muted" }, "no users yet"));
}

// -- a user ----------------------------------------------------------------------------------
async function openUser(user) {
  state.user = user;
  showUsers();
  $("user").hidden = false;
  $("user-title").textContent = user;
  $("entry").hidden = true;
  $("ask-result").replaceChildren();
  showTab("memories");
  await loadEntries();
  showErase();
}

function showTab(name) {
  for (const button of document.querySelectorAll(".tabs button")) {
    button.setAttribute("aria-selected", String(button.dataset.tab === name));
  }
  for (const tab of document.querySelectorAll(".tab")) tab.hidden = tab.id !== "tab-" + name;
  if (name === "knowledge") guarded(showKnowledge)();
}

async function loadEntries() {
  state.entries = await api("GET", "memories", { user_id: state.user, include_superseded: "true" });
  state.entries.sort((a, b) => effective(b).localeCompare(effective(a)) || b.created_at.localeCompare(a.created_at));
  const kinds = [...new Set(state.entries.map((e) => e.kind))].sort();
  const select = $("memory-kind");
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "every kind"),
    ...kinds.map((k) => el("option", { value: k }, `${k} (${state.entries.filter((e) => e.kind === k).length})`)));
  select.value = kinds.includes(chosen) ? chosen : "";
  showEntries();
}

function effective(entry) { return entry.event_time || entry.created_at; }

function showEntries() {
  const words = $("memory-query").value.trim().toLowerCase();
  const kind = $("memory-kind").value;
  const superseded = $("memory-superseded").checked;
  const shown = state.entries.filter((e) =>
    (!kind || e.kind === kind) && (superseded || !e.superseded_by) &&
    (!words || e.text.toLowerCase().includes(words)));
  $("memory-count").textContent = `${shown.length} of ${state.entries.length} entries, newest first`;
  $("memories").tBodies[0].replaceChildren(...shown.map((e) =>
    el("tr", { data: { id: e.id }, onclick: guarded(() => openEntry(e.id)) },
      el("td", { class: "nowrap" }, when(effective(e))),
      el("td", {}, e.kind),
      el("td", { class: "text" }, e.text),
      el("td", {}, e.superseded_by ? "superseded" : "holds"))));
}

async function openEntry(id) {
  for (const row of $("memories").tBodies[0].rows) row.classList.toggle("current", row.dataset.id === id);
  const entry = await api("GET", "memories/" + encodeURIComponent(id), { user_id: state.user });
  const [history, turns] = await Promise.all([
    api("GET", "memories/" + encodeURIComponent(id) + "/history", { user_id: state.user }),
    api("POST", "source-turns", {}, { user_id: state.user, hits: [{ item: entry, score: 0, explanation: { components: {}, note: "" } }] }),
  ]);
  const supersedes = state.entries.filter((e) => e.superseded_by === entry.id);
  const box = $("entry");
  box.replaceChildren(
    el("h3", {}, "Entry"),
    el("pre", {}, entry.text),
    el("dl", {},
      el("dt", {}, "kind"), el("dd", {}, entry.kind),
      el("dt", {}, "id"), el("dd", {}, entry.id),
      el("dt", {}, "session"), el("dd", {}, entry.session_id || "none"),
      el("dt", {}, "happened"), el("dd", {}, entry.event_time ? when(entry.event_time) : "unknown"),
      el("dt", {}, "written"), el("dd", {}, when(entry.created_at)),
      el("dt", {}, "updated"), el("dd", {}, when(entry.updated_at)),
      el("dt", {}, "retrieved"), el("dd", {}, `${entry.access_count} times` + (entry.last_accessed ? ", last " + when(entry.last_accessed) : "")),
      el("dt", {}, "superseded by"), el("dd", { id: "superseded-by" }, entry.superseded_by ? entryLink(entry.superseded_by) : "nothing: it holds"),
      el("dt", {}, "supersedes"), el("dd", {}, supersedes.length ? supersedes.map((e) => entryLink(e.id, e.text)) : "nothing")),
    el("h3", {}, "Source turns"),
    turnTable(entry.source_turn_ids.map((t) => turns[t] || { turn_id: t, missing: true })),
    el("h3", {}, "History"),
    historyTable(history));
  box.hidden = false;
}

function entryLink(id, text) {
  return el("button", { type: "button", class: "link", onclick: guarded(() => openEntry(id)) }, text || id);
}

function turnTable(turns) {
  return el("table", { class: "turns" },
    el("thead", {}, el("tr", {}, el("th", {}, "speaker"), el("th", {}, "session"), el("th", {}, "time"), el("th", {}, "said"))),
    el("tbody", {}, turns.map((t) => t.missing
      ? el("tr", {}, el("td", { colspan: 4, class: "muted" }, `turn ${t.turn_id}: no longer stored`))
      : el("tr", {}, el("td", {}, t.speaker), el("td", {}, t.session_id), el("td", { class: "nowrap" }, when(t.timestamp)), el("td", { class: "text" }, t.content)))));
}

function historyTable(events) {
  return el("table", { class: "history" },
    el("thead", {}, el("tr", {}, el("th", {}, "when"), el("th", {}, "change"), el("th", {}, "by"), el("th", {}, "before"), el("th", {}, "after"))),
    el("tbody", {}, events.map((e) => el("tr", {},
      el("td", { class: "nowrap" }, when(e.at)),
      el("td", {}, OPS[e.op] || e.op, detailChips(e.detail)),
      el("td", {}, e.actor),
      el("td", { class: "text" }, e.before ?? "—"),
      el("td", { class: "text" }, e.after ?? "—")))));
}

function detailChips(detail) {
  const shown = Object.entries(detail || {}).filter(([, v]) => v !== null && typeof v !== "object");
  return shown.length ? el("div", {}, shown.map(([k, v]) => el("span", { class: "chip" }, `${k} ${v}`))) : null;
}

// -- ask -------------------------------------------------------------------------------------
async function ask(forAnswer) {
  const query = $("ask-query").value.trim();
  if (!query) throw new Error("type a question first");
  const body = { query, user_id: state.user };
  if (!forAnswer) {
    body.budget_tokens = Number($("ask-budget").value) || 1200;
    if ($("ask-k").value) body.k = Number($("ask-k").value);
    body.expand = $("ask-expand").checked;
  }
  const trace = await api("POST", forAnswer ? "inspect/answer" : "inspect/context", {}, body);
  showTrace(trace, forAnswer);
}

function chips(explanation) {
  const parts = Object.entries(explanation.components).map(([name, value]) =>
    el("span", { class: "chip", title: name }, `${name} ${Number.isInteger(value) ? value : value.toFixed(4)}`));
  return el("div", { class: "explanation" }, parts, explanation.note ? el("div", { class: "muted" }, explanation.note) : null);
}

function evidence(unit, trace) {
  if (unit.line !== null) return el("div", { class: "text" }, unit.line);
  return unit.turn_ids.map((id) => {
    const t = trace.turns[id];
    return t
      ? el("p", { class: "turn" }, el("span", { class: "who" }, t.speaker), ` · ${t.session_id} · ${when(t.timestamp)}: `, t.content)
      : el("p", { class: "turn muted" }, `turn ${id}: no longer stored`);
  });
}

function unitRows(units, trace) {
  return units.map(({ unit, index }) => {
    const hit = trace.hits[unit.hit];
    return el("tr", { class: unit.kept ? "kept" : "cut", data: { unit: index } },
      el("td", {}, index + 1),
      el("td", {}, unit.hit >= 0 ? `#${unit.hit + 1} ` : "", ORIGINS[unit.origin] || unit.origin, hit ? el("div", { class: "muted" }, `${hit.item.kind || "knowledge"}, score ${hit.score.toFixed(4)}`) : null),
      el("td", {}, unit.value.toFixed(3)),
      el("td", {}, unit.tokens),
      el("td", {}, unit.kept ? "kept" : "cut", el("div", { class: "muted" }, unit.reason)),
      el("td", {}, evidence(unit, trace)),
      el("td", {}, hit && unit.origin === "hit" ? chips(hit.explanation) : el("span", { class: "muted" }, "see the hit")));
  });
}

function unitTable(units, trace) {
  return el("table", { class: "units" },
    el("thead", {}, el("tr", {}, ["#", "came with", "value", "tokens", "kept or cut", "evidence turns", "score explanation"].map((h) => el("th", {}, h)))),
    el("tbody", {}, unitRows(units, trace)));
}

function showTrace(trace, forAnswer) {
  const ctx = trace.context;
  const units = trace.units.map((unit, index) => ({ unit, index }));
  const kept = units.filter((u) => u.unit.kept);
  const cut = units.filter((u) => !u.unit.kept);
  const parts = [];
  if (forAnswer) {
    parts.push(el("div", { class: "answer" + (trace.refused ? " refused" : ""), id: "answer" },
      el("h3", {}, trace.refused ? "Answer: refused" : "Answer"),
      trace.refused ? el("p", {}, "Why: " + trace.refused) : null,
      el("pre", {}, trace.answer)));
  }
  parts.push(
    el("p", { class: "muted", id: "trace-summary" },
      `${trace.hits.length} hits retrieved (k ${trace.k}), ${trace.units.length} units offered, ${kept.length} kept: ` +
      `${ctx.tokens} of ${trace.budget_tokens} tokens`),
    el("h3", {}, forAnswer ? "Context built for the generator" : "Context delivered"),
    el("pre", { id: "context-text" }, ctx.text || "(nothing delivered)"),
    el("h3", {}, `Units kept (${kept.length}), best value first`),
    unitTable(kept, trace),
    el("details", {}, el("summary", {}, `Units cut (${cut.length})`), unitTable(cut, trace)),
    el("details", {}, el("summary", {}, `Hits retrieved (${trace.hits.length})`), hitTable(trace)));
  $("ask-result").replaceChildren(...parts);
}

function hitTable(trace) {
  const delivered = new Set(trace.context.hits.map((h) => h.item.id));
  return el("table", {},
    el("thead", {}, el("tr", {}, ["#", "text", "delivered", "score explanation"].map((h) => el("th", {}, h)))),
    el("tbody", {}, trace.hits.map((h, i) => el("tr", {},
      el("td", {}, i + 1), el("td", { class: "text" }, h.item.text),
      el("td", {}, delivered.has(h.item.id) ? "yes" : "no"), el("td", {}, chips(h.explanation))))));
}

// -- knowledge -------------------------------------------------------------------------------
async function showKnowledge() {
  const box = $("knowledge");
  const known = await api("GET", "inspect/knowledge", { user_id: state.user });
  if (!known.enabled) {
    box.replaceChildren(el("p", { id: "ltm-off" }, "LTM is off in this service: it keeps no shared knowledge, so this user fed none."));
    return;
  }
  box.replaceChildren(
    el("p", { class: "muted" }, "Shared, de-identified knowledge that this user's memories support. The graph holds no user id: " +
      "this user's share is found by their entries' keyed provenance, and other users' support is only counted."),
    known.items.length
      ? el("table", {},
        el("thead", {}, el("tr", {}, ["knowledge", "kind", "evidence", "from this user", "confidence", "last supported"].map((h) => el("th", {}, h)))),
        el("tbody", {}, known.items.map((k) => el("tr", {},
          el("td", { class: "text" }, k.text), el("td", {}, k.kind), el("td", {}, k.evidence),
          el("td", {}, k.from_user), el("td", {}, k.confidence.toFixed(2)), el("td", { class: "nowrap" }, when(k.last_supported))))))
      : el("p", {}, "None yet: consolidation has not used this user's memories."));
}

// -- erase -----------------------------------------------------------------------------------
function showErase() {
  const box = $("erase");
  if (state.info.read_only) {
    box.replaceChildren(el("p", { id: "erase-disabled" },
      "Erasing is disabled: this inspector serves the data directory read-only. " +
      "Erase through tiermem serve's /inspect with an API key, or with Memory.forget_user."));
    return;
  }
  const confirm = el("input", { id: "erase-confirm", placeholder: "type the user id to confirm", autocomplete: "off" });
  const button = el("button", { id: "erase-button", type: "button", disabled: "" }, "Erase this user everywhere");
  confirm.addEventListener("input", () => { button.disabled = confirm.value !== state.user; });
  button.addEventListener("click", guarded(async () => {
    const user = state.user;
    const report = await api("DELETE", "users/" + encodeURIComponent(user));
    state.info = await api("GET", "inspect/users");
    showUsers();
    box.replaceChildren(el("h3", {}, `Erased ${user}`), el("dl", { id: "erase-report" },
      Object.entries(report).filter(([k]) => k !== "user_id").flatMap(([k, v]) => [el("dt", {}, k.replaceAll("_", " ")), el("dd", {}, v)])));
    state.entries = [];
    showEntries();
  }));
  box.replaceChildren(
    el("p", {}, `Erase ${state.user} with this key's rights: their entries, source turns, audit rows, working memory, ` +
      "and their support of shared knowledge. It cannot be undone."),
    el("div", { class: "row" }, confirm, button));
}

// -- wiring ----------------------------------------------------------------------------------
document.addEventListener("DOMContentLoaded", () => {
  takeKeyFromFragment();
  $("key-form").addEventListener("submit", guarded(async () => {
    sessionStorage.setItem(KEY_SLOT, $("key").value.trim());
    $("key").value = "";
    await start();
  }));
  $("sign-out").addEventListener("click", signOut);
  $("open-user").addEventListener("submit", guarded(() => openUser($("user-id").value.trim())));
  for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => showTab(button.dataset.tab));
  $("memory-filter").addEventListener("submit", (event) => event.preventDefault());
  for (const id of ["memory-query", "memory-kind", "memory-superseded"]) $(id).addEventListener("input", showEntries);
  $("ask-form").addEventListener("submit", guarded(() => ask(false)));
  $("ask-answer").addEventListener("click", guarded(() => ask(true)));
  guarded(start)();
});
