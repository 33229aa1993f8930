// The console's pages: rows come from the server as Server-Sent Events
// (reset, upsert, remove, denied) and are laid out here. Nothing is built
// from HTML strings: every value is set as text.
"use strict";

const page = document.body.dataset.page;
let source = null;

const columns = {
  fleet: ["namespace", "name", "path", "kind", "state", "progress", "version", "detail", "failing"],
  hosts: ["namespace", "name", "kind", "state", "power", "hardware", "detail", "failing", "approval", "edit"],
  infraenvs: ["namespace", "name", "state", "iso", "ipxe", "agents", "nmstate"],
};

// The InfraEnvs page follows Agents and NMStateConfigs only to count them.
const listed = { infraenvs: ["InfraEnv"] };

// selects tells whether a label selector selects labels; as the agent
// service reads nmStateConfigLabelSelector, an empty one selects none.
function selects(sel, labels) {
  const ml = Object.entries(sel?.matchLabels || {});
  const exprs = sel?.matchExpressions || [];
  if (ml.length === 0 && exprs.length === 0) return false;
  labels = labels || {};
  if (!ml.every(([k, v]) => labels[k] === v)) return false;
  return exprs.every((e) => {
    const has = Object.hasOwn(labels, e.key);
    switch (e.operator) {
      case "In": return has && (e.values || []).includes(labels[e.key]);
      case "NotIn": return !has || !(e.values || []).includes(labels[e.key]);
      case "Exists": return has;
      case "DoesNotExist": return !has;
      default: return false;
    }
  });
}

function link(href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  return a;
}

function cell(row, col) {
  const td = document.createElement("td");
  td.className = "col-" + col;
  switch (col) {
    case "progress":
      if (row.progress >= 0) {
        const bar = document.createElement("progress");
        bar.max = 100;
        bar.value = row.progress;
        const label = document.createElement("span");
        label.className = "percent";
        label.textContent = " " + row.progress + "%";
        td.append(bar, label);
      }
      break;
    case "name":
      if (row.path) td.append(link("/clusters/" + [row.path, row.namespace, row.name].map(encodeURIComponent).join("/"), row.name));
      else td.textContent = row.name;
      break;
    case "iso":
    case "ipxe":
      if (row[col]) td.append(link(row[col], row[col]));
      break;
    case "agents":
      td.textContent = [...rows.values()].filter((r) => r.kind === "Agent" && r.namespace === row.namespace && r.infraEnv === row.name).length;
      break;
    case "nmstate":
      td.textContent = [...rows.values()].filter((r) => r.kind === "NMStateConfig" && r.namespace === row.namespace && selects(row.selector, r.labels))
        .map((r) => r.name).sort().join(", ");
      break;
    case "failing":
      td.textContent = row.failing || "";
      if (row.failing) td.classList.add("failing");
      break;
    case "approval":
      if (row.approved === true) td.textContent = "approved";
      if (row.approved === false) {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "approve";
        b.textContent = "Approve";
        b.addEventListener("click", () => approve(row, b));
        td.append(b);
      }
      break;
    case "edit":
      if (row.kind === "Agent") {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "edit";
        b.textContent = "Edit";
        b.addEventListener("click", () => openEdit(row));
        td.append(b);
      }
      break;
    default:
      td.textContent = row[col] || "";
  }
  return td;
}

function render() {
  const state = document.getElementById("state").value.trim().toLowerCase();
  const waiting = document.getElementById("waiting")?.checked;
  const body = document.querySelector("#rows tbody");
  const shown = [...rows.values()]
    .filter((r) => !listed[page] || listed[page].includes(r.kind))
    .filter((r) => !state || r.state.toLowerCase().includes(state))
    .filter((r) => !waiting || r.approved === false)
    .sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.kind.localeCompare(b.kind));
  body.replaceChildren(...shown.map((r) => {
    const tr = document.createElement("tr");
    tr.id = "row-" + r.key;
    tr.dataset.key = r.key;
    tr.append(...columns[page].map((c) => cell(r, c)));
    return tr;
  }));
  document.getElementById("empty").hidden = shown.length > 0;
  const messages = document.getElementById("messages");
  messages.replaceChildren(...[...denied.entries()].map(([kind, msg]) => message("denied", msg, "denied-" + kind)));
}

function message(cls, text, id) {
  const p = document.createElement("p");
  p.className = cls;
  p.id = id;
  p.textContent = text;
  return p;
}

function connect() {
  if (source) source.close();
  rows.clear();
  denied.clear();
  render();
  const ns = document.getElementById("namespace").value.trim();
  source = follow("/api/watch/" + page + (ns ? "?namespace=" + encodeURIComponent(ns) : ""), render);
}

async function post(url, body) {
  const headers = { "X-CSRF-Token": csrf };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(url, { method: "POST", headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) });
  if (resp.status === 401) { location.href = "/signin"; return null; }
  return resp;
}

async function approve(row, button) {
  button.disabled = true;
  const resp = await post("/api/agents/" + encodeURIComponent(row.namespace) + "/" + encodeURIComponent(row.name) + "/approve");
  if (!resp) return;
  if (!resp.ok) {
    let text = "Approving " + row.namespace + "/" + row.name + " failed (" + resp.status + ")";
    try { text += ": " + (await resp.json()).error; } catch (_) { /* not JSON */ }
    document.getElementById("errors").replaceChildren(message("error", text, "approve-error"));
    button.disabled = false;
  }
  // On success the watch brings the approved row.
}

// The edit dialog of an Agent's role and host name: outside the table,
// so that the rows the watch redraws do not take what is being typed.
let editing = null;

function openEdit(row) {
  editing = row;
  document.getElementById("edit-title").textContent = "Agent " + row.namespace + "/" + row.name;
  document.getElementById("edit-role").value = row.role || "auto-assign";
  document.getElementById("edit-hostname").value = row.host || "";
  document.getElementById("edit-error").hidden = true;
  document.getElementById("edit-agent").showModal();
}

async function saveEdit(e) {
  e.preventDefault();
  const row = editing;
  const save = document.getElementById("edit-save");
  save.disabled = true;
  const resp = await post("/api/agents/" + encodeURIComponent(row.namespace) + "/" + encodeURIComponent(row.name) + "/spec",
    { role: document.getElementById("edit-role").value, hostname: document.getElementById("edit-hostname").value.trim() });
  save.disabled = false;
  if (!resp) return;
  if (!resp.ok) {
    const err = document.getElementById("edit-error");
    let text = "Saving failed (" + resp.status + ")";
    try { text += ": " + (await resp.json()).error; } catch (_) { /* not JSON */ }
    err.textContent = text;
    err.hidden = false;
    return;
  }
  // The watch brings the edited row.
  document.getElementById("edit-agent").close();
}

if (page === "hosts") {
  document.getElementById("edit-form").addEventListener("submit", saveEdit);
  document.getElementById("edit-cancel").addEventListener("click", () => document.getElementById("edit-agent").close());
}

document.getElementById("signout").addEventListener("click", async () => {
  await post("/signout");
  location.href = "/signin";
});
document.getElementById("filters").addEventListener("submit", (e) => { e.preventDefault(); connect(); });
document.getElementById("namespace").addEventListener("change", connect);
document.getElementById("state").addEventListener("input", render);
document.getElementById("waiting")?.addEventListener("change", render);
connect();
