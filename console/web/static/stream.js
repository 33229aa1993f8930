// What every console page shares: its rows, the kinds it may not read,
// and how it follows the server's Server-Sent Events (reset, upsert,
// remove, denied, unauthorized) into them.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const rows = new Map();   // key -> row
const denied = new Map(); // kind -> message

function removeKind(kind) {
  for (const [key, r] of rows) if (r.kind === kind) rows.delete(key);
}

// follow opens the event stream at url, keeps rows and denied from it and
// calls render after each change; the "live" mark says whether the stream
// is up. It returns the EventSource.
function follow(url, render) {
  const live = document.getElementById("live");
  const source = new EventSource(url);
  source.onopen = () => { live.textContent = "live"; live.classList.add("on"); };
  source.onerror = () => { live.textContent = "reconnecting…"; live.classList.remove("on"); };
  source.addEventListener("reset", (e) => {
    const d = JSON.parse(e.data);
    removeKind(d.kind);
    denied.delete(d.kind);
    for (const r of d.rows) rows.set(r.key, r);
    render();
  });
  source.addEventListener("upsert", (e) => { const r = JSON.parse(e.data); rows.set(r.key, r); render(); });
  source.addEventListener("remove", (e) => { rows.delete(JSON.parse(e.data).key); render(); });
  source.addEventListener("unauthorized", () => { source.close(); location.href = "/signin"; });
  source.addEventListener("denied", (e) => {
    const d = JSON.parse(e.data);
    removeKind(d.kind);
    denied.set(d.kind, d.message);
    render();
  });
  return source;
}
