// A cluster's page: the install (or Cluster API Cluster), its Agents (or
// Machines), a timeline of each host's stages and the Events of them all,
// kept live from the server's Server-Sent Events. Every value is set as
// text, never as HTML.
"use strict";

const { path, namespace, name } = document.body.dataset;
const svgNS = "http://www.w3.org/2000/svg";

// The stages of a host's installation, in order (the agent service's
// spelling).
const stages = ["Starting installation", "Waiting for control plane", "Waiting for bootkube", "Waiting for controller",
  "Installing", "Writing image to disk", "Copying registry data to disk", "Rebooting", "Waiting for ignition",
  "Configuring", "Joined", "Done"];
// Their short names, above the bars.
const short = ["Start", "Wait CP", "Bootkube", "Controller", "Installing", "Writing", "Registry", "Rebooting", "Ignition",
  "Configuring", "Joined", "Done"];

const of = (kind) => [...rows.values()].filter((r) => r.kind === kind).sort((a, b) => a.name.localeCompare(b.name));
const hostKind = path === "agent" ? "Agent" : "Machine";

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function list(items, cls) {
  return (items || []).map((t) => el("li", t, cls));
}

function progress(value) {
  if (value < 0) return [];
  const bar = el("progress");
  bar.max = 100;
  bar.value = value;
  return [bar, el("span", " " + value + "%", "percent")];
}

function renderSummary() {
  const top = of(path === "agent" ? "AgentClusterInstall" : "Cluster")[0] || of("ClusterDeployment")[0];
  document.getElementById("cluster-state").textContent = top ? top.state : "";
  document.getElementById("cluster-progress").replaceChildren(...(top ? progress(top.progress) : []));
  document.getElementById("cluster-failing").textContent = top?.failing || "";
  if (path === "agent") {
    const cd = of("ClusterDeployment")[0];
    document.getElementById("cluster-deployment").textContent = cd ? cd.name + " (" + cd.state + ")" : "";
    const aci = of("AgentClusterInstall")[0];
    document.getElementById("install-validations").replaceChildren(...list(aci?.validations, "validation"));
  } else {
    document.getElementById("conditions").replaceChildren(...list(top?.conditions, "condition"));
  }
}

function hostRow(r) {
  const tr = el("tr");
  tr.dataset.key = r.key;
  const cols = path === "agent"
    ? [["name", r.name], ["host", r.host], ["role", r.role], ["state", r.state], ["stage", r.stage]]
    : [["name", r.name], ["state", r.state], ["node", r.node], ["ready", r.ready]];
  tr.append(...cols.map(([c, v]) => el("td", v || "", "col-" + c)));
  if (path === "agent") {
    const p = el("td", undefined, "col-progress");
    p.append(...progress(r.progress));
    const v = el("td", undefined, "col-validations failing");
    const ul = el("ul");
    ul.append(...list(r.validations, "validation"));
    v.append(ul);
    tr.append(p, v);
  }
  return tr;
}

// renderTimeline draws one bar per Agent across the stages: those it
// passed, the one it is in, those ahead. Its HostStatusUpdated Events
// are its bar's tooltip.
function renderTimeline() {
  const agents = of("Agent");
  const labelW = 300, stageW = 74, rowH = 26, top = 20;
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("width", labelW + stages.length * stageW + 10);
  svg.setAttribute("height", top + agents.length * rowH + 6);
  stages.forEach((s, i) => {
    const t = document.createElementNS(svgNS, "text");
    t.setAttribute("x", labelW + i * stageW + 2);
    t.setAttribute("y", 14);
    t.setAttribute("class", "label");
    t.textContent = short[i];
    const title = document.createElementNS(svgNS, "title");
    title.textContent = s;
    t.append(title);
    svg.append(t);
  });
  agents.forEach((a, n) => {
    const g = document.createElementNS(svgNS, "g");
    g.setAttribute("class", "host");
    g.dataset.key = a.key;
    g.dataset.stage = a.stage || "";
    const y = top + n * rowH;
    const label = document.createElementNS(svgNS, "text");
    label.setAttribute("x", 4);
    label.setAttribute("y", y + 16);
    label.setAttribute("class", "label");
    label.textContent = (a.host || a.name) + (a.stage ? " · " + a.stage : "");
    g.append(label);
    const history = of("Event").filter((e) => e.involved === "Agent/" + a.name && e.reason === "HostStatusUpdated")
      .sort((x, y2) => x.time.localeCompare(y2.time)).map((e) => e.time + " " + e.detail);
    const current = stages.indexOf(a.stage);
    const failed = a.stage === "Failed" || a.state === "error";
    stages.forEach((s, i) => {
      const rect = document.createElementNS(svgNS, "rect");
      rect.setAttribute("x", labelW + i * stageW);
      rect.setAttribute("y", y + 4);
      rect.setAttribute("width", stageW - 2);
      rect.setAttribute("height", rowH - 8);
      let cls = "stage-todo";
      if (current >= 0 && i < current) cls = "stage-done";
      if (i === current) cls = a.stage === "Done" ? "stage-done" : "stage-current";
      if (failed && i === Math.max(current, 0)) cls = "stage-failed";
      rect.setAttribute("class", cls);
      const title = document.createElementNS(svgNS, "title");
      title.textContent = s + (history.length ? "\n" + history.join("\n") : "");
      rect.append(title);
      g.append(rect);
    });
    svg.append(g);
  });
  document.getElementById("timeline").replaceChildren(svg);
}

function render() {
  renderSummary();
  const hosts = of(hostKind);
  document.querySelector("#hosts tbody").replaceChildren(...hosts.map(hostRow));
  if (path === "agent") renderTimeline();
  // The Events of the page's objects: the server sends those of the
  // cluster and of every Agent (or Machine) of the namespace.
  const mine = new Set(hosts.map((h) => hostKind + "/" + h.name));
  const events = of("Event").filter((e) => !e.involved.startsWith(hostKind + "/") || mine.has(e.involved))
    .sort((a, b) => b.time.localeCompare(a.time));
  document.querySelector("#events tbody").replaceChildren(...events.map((e) => {
    const tr = el("tr");
    tr.dataset.key = e.key;
    tr.append(el("td", e.time), el("td", e.state), el("td", e.reason), el("td", e.involved), el("td", e.detail || ""));
    return tr;
  }));
  document.getElementById("messages").replaceChildren(...[...denied.entries()].map(([kind, msg]) => {
    const p = el("p", msg, "denied");
    p.id = "denied-" + kind;
    return p;
  }));
}

function connect() {
  follow("/api/watch/cluster/" + [path, namespace, name].map(encodeURIComponent).join("/"), render);
}

// The kubeconfig is fetched, so that a refusal is shown on the page
// rather than downloaded.
async function downloadKubeconfig(e) {
  e.preventDefault();
  const a = e.currentTarget;
  const out = document.getElementById("kubeconfig-error");
  out.textContent = "";
  const resp = await fetch(a.href, { credentials: "same-origin" });
  if (resp.status === 401) { location.href = "/signin"; return; }
  if (!resp.ok) {
    let text = resp.status === 403 ? "You may not read the kubeconfig." : "The kubeconfig could not be read.";
    try { text = (await resp.json()).error; } catch (_) { /* not JSON */ }
    out.textContent = text + " (" + resp.status + ")";
    return;
  }
  const url = URL.createObjectURL(await resp.blob());
  const save = document.createElement("a");
  save.href = url;
  save.download = (of("ClusterDeployment")[0]?.name || name) + "-kubeconfig";
  document.body.append(save);
  save.click();
  save.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

document.getElementById("signout").addEventListener("click", async () => {
  await fetch("/signout", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
  location.href = "/signin";
});
document.getElementById("kubeconfig")?.addEventListener("click", downloadKubeconfig);
connect();
