"use strict";
// The console page: every Server-Sent Event carries the whole state; each update
// re-renders the tables from it (no reload, no framework, no build step).

const PAGES = ["overview", "topics", "groups", "quarantine", "timeline"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : String(child ?? "-"));
  }
  return node;
}

function cell(value, cls) {
  return el("td", cls ? { class: cls } : {}, value);
}

function list(values) {
  return "[" + (values || []).join(",") + "]";
}

function when(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function renderOverview(snapshot) {
  document.getElementById("cluster-id").textContent = snapshot.cluster_id ?? "-";
  document.getElementById("controller").textContent = snapshot.controller;
  document.getElementById("metastore").textContent = snapshot.metastore ?? "-";
  fill(document.querySelector("#brokers tbody"), snapshot.brokers.map((b) =>
    el("tr", { "data-broker": b.id },
      cell(b.id), cell(`${b.host}:${b.port}`), cell(b.rack ?? "-"),
      cell(b.id === snapshot.controller ? "controller" : "broker"))));
}

function partitionRow(topic, p) {
  const logs = Object.entries(p.replica_log_ends || {}).map(([r, end]) => `${r}:${end}`);
  return el("tr", { "data-partition": `${topic.name}-${p.partition}` },
    cell(p.partition), cell(p.leader, "leader"), cell(p.leader_epoch, "leader-epoch num"),
    cell(list(p.isr), "isr"), cell(list(p.replicas)), cell(list(p.offline_replicas)),
    cell(p.high_watermark, "num"), cell(p.log_start, "num"), cell(p.log_end, "num"),
    cell(logs.join(" ")), cell(p.error ?? ""));
}

function renderTopics(snapshot) {
  const blocks = snapshot.topics.map((topic) => el("div", { "data-topic": topic.name },
    el("h3", {}, topic.name, " ", el("small", {}, `topic id ${topic.topic_id}`)),
    el("table", { class: "partitions" },
      el("thead", {}, el("tr", {}, ...["Partition", "Leader", "Leader epoch", "ISR",
        "Replicas", "Offline", "High watermark", "Log start", "Log end",
        "Replica log ends", "Error"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...topic.partitions.map((p) => partitionRow(topic, p))))));
  document.getElementById("topics").replaceChildren(
    ...(blocks.length ? blocks : [el("p", {}, "no topics")]));
}

function renderGroups(snapshot) {
  const root = document.getElementById("groups");
  if (typeof snapshot.groups === "string") {
    root.replaceChildren(el("p", { class: "error-text" }, snapshot.groups));
    return;
  }
  const blocks = snapshot.groups.map((g) => el("div", { "data-group": g.group_id },
    el("h3", {}, g.group_id, " ", el("small", {}, `${g.state}, ${g.members.length} members`)),
    el("ul", {}, ...g.members.map((m) =>
      el("li", {}, `${m.client_id} (${m.client_host}) ${m.member_id}: ${m.assignment.join(", ")}`))),
    el("table", {},
      el("thead", {}, el("tr", {}, ...["Partition", "Committed offset", "Leader epoch", "Lag"]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, ...g.offsets.map((o) => el("tr", { "data-partition": `${o.topic}-${o.partition}` },
        cell(`${o.topic}-${o.partition}`), cell(o.offset, "num"),
        cell(o.leader_epoch, "num"), cell(o.lag, "num")))))));
  root.replaceChildren(...(blocks.length ? blocks : [el("p", {}, "no consumer groups")]));
}

function truncationText(t) {
  return t.cause === "election"
    ? `election: new leader ${t.replica} lacks what leader ${t.old_leader} held`
    : `replica ${t.replica} cut its log`;
}

function renderQuarantine(state) {
  fill(document.querySelector("#truncations tbody"), state.truncations.map((t) =>
    el("tr", { "data-partition": t.partition, class: "truncation" },
      cell(when(t.time_ms)), cell(t.partition), cell(truncationText(t)), cell(t.replica),
      cell(`${t.first_offset}..${t.last_offset}`, "offsets"), cell(t.records, "num"),
      cell(t.epoch ?? "-"))));
  document.getElementById("replay-button").disabled = !state.allow_actions;
  document.getElementById("replay-mode").textContent = state.allow_actions
    ? "Replay writes the file's records again, as new records, after a confirmation."
    : "Read-only console: start it with --allow-actions to replay.";
}

function eventText(e) {
  if (e.kind === "seen") return `first seen (topic id ${e.topic_id})`;
  if (e.kind === "leader_epoch" && e.old_epoch < 0) {
    return `leader epoch ${e.new_epoch}, leader ${e.new_leader}`;
  }
  if (e.kind === "leader_epoch") {
    return `leader epoch ${e.old_epoch} → ${e.new_epoch}, leader ${e.old_leader} → ${e.new_leader}`;
  }
  return `truncation: ${truncationText(e)}, offsets ${e.first_offset}..${e.last_offset}` +
    ` (${e.records} records)`;
}

function renderTimeline(state) {
  const blocks = Object.entries(state.timeline).map(([partition, events]) =>
    el("div", { class: "timeline-partition", "data-partition": partition },
      el("h3", {}, partition),
      el("ol", {}, ...events.map((e) => el("li", { "data-kind": e.kind,
        class: e.kind === "truncation" ? "truncation" : "" },
        `${when(e.time_ms)}  ${eventText(e)}`)))));
  document.getElementById("timeline").replaceChildren(
    ...(blocks.length ? blocks : [el("p", {}, "nothing observed yet")]));
}

function render(state) {
  const status = document.getElementById("status");
  status.className = state.error ? "error" : "";
  if (state.snapshot) {
    status.textContent = (state.error ? `stale (${state.error}); ` : "") +
      `updated ${when(state.snapshot.time_ms)}`;
    renderOverview(state.snapshot);
    renderTopics(state.snapshot);
    renderGroups(state.snapshot);
  } else {
    status.textContent = state.error || "waiting for the first snapshot";
  }
  renderQuarantine(state);
  renderTimeline(state);
}

function showPage() {
  const page = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : "overview";
  for (const name of PAGES) {
    document.getElementById(`page-${name}`).classList.toggle("active", name === page);
    document.querySelector(`nav a[data-page="${name}"]`).classList.toggle("active", name === page);
  }
}

async function post(url, body) {
  // Every answer of the console's actions is JSON; anything else is shown as it came.
  const response = await fetch(url, { method: "POST", body });
  const text = await response.text();
  try {
    return { ok: response.ok, answer: JSON.parse(text) };
  } catch {
    return { ok: false, answer: { error: `${response.status} ${text}` } };
  }
}

async function replay(event) {
  event.preventDefault();
  const note = document.getElementById("replay-note");
  const proposed = await post("/api/replay", new FormData(event.target));
  const summary = proposed.answer;
  if (!proposed.ok) {
    note.textContent = `refused: ${summary.error}`;
    return;
  }
  const question = `Replay ${summary.records} records (offsets ${summary.first_offset}..` +
    `${summary.last_offset}, epochs ${list(summary.epochs)}) into ` +
    `${summary.topic}-${summary.partition} as new records?`;
  if (!window.confirm(question)) {
    note.textContent = "replay cancelled";
    return;
  }
  const done = await post(`/api/replay/${summary.token}/confirm`);
  note.textContent = done.ok ? done.answer.result : `failed: ${done.answer.error}`;
}

window.addEventListener("hashchange", showPage);
document.getElementById("replay-form").addEventListener("submit", replay);
showPage();
const events = new EventSource("/api/events");
events.onmessage = (message) => render(JSON.parse(message.data));
events.onerror = () => {
  document.getElementById("status").textContent = "reconnecting…";
};
