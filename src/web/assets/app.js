// tunepack dashboard: a small hash-routed page over the read-only JSON API.
// Every view has a refresh() that the page calls once a second while it is
// shown; text always goes in through textContent, and only the server's own
// SVG charts (whose text the server escapes) through innerHTML.
"use strict";

const POLL_MS = 1000;
const view = document.getElementById("view");
const tabs = document.getElementById("tabs");
const live = document.getElementById("live");
let current = null;      // {refresh, key}
let busy = false;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, {credentials: "same-origin"});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function getText(path) {
  const r = await fetch(path, {credentials: "same-origin"});
  if (!r.ok) throw new Error(r.statusText);
  return r.text();
}

function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(6).replace(/\.?0+$/, "");
  return typeof v === "string" ? v : JSON.stringify(v);
}
function fmtParams(p) {
  if (!p || typeof p !== "object") return fmt(p);
  return Object.entries(p).map(([k, v]) => k + "=" + fmt(v)).join(" ");
}
function where(r) {
  if (!r.node) return "";
  const g = Array.isArray(r.gpus) && r.gpus.length ? " gpu" + r.gpus.join(",") : " cpu";
  return r.node + g;
}
function rungBudget(r) {
  return r.rung === null ? "" : r.rung + (r.budget ? " / " + fmt(r.budget) : "");
}
// "1 trial", "2 trials".
function count(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
function duration(s) {
  if (s === null || s === undefined || !isFinite(s)) return "";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(2) + " h";
}

// ---- experiments ---------------------------------------------------------

function experimentsView() {
  const table = el("table", {id: "experiments"});
  view.replaceChildren(el("h1", {text: "Experiments"}), table);
  return async () => {
    const {experiments} = await getJSON("/api/experiments");
    const head = el("tr", {}, ...["name", "directory", "state", "trials ended", "pending", "running",
      "paused", "completed", "stopped early", "failed", "best"].map(h => el("th", {text: h})));
    const rows = experiments.map(e => {
      const c = e.counts || {};
      const done = ended(e);
      const pct = e.total ? Math.round(100 * done / e.total) : 0;
      const bar = el("span", {class: "bar", title: progress(e)}, el("span"));
      bar.firstChild.style.width = pct + "%";
      const best = e.best ? el("a", {href: "#/e/" + e.id + "/trial/" + e.best.trial,
                                     text: fmt(e.best.value) + " (trial " + e.best.trial + ")"}) : "";
      return el("tr", {"data-experiment": e.id},
        el("td", {}, el("a", {href: "#/e/" + e.id + "/trials", text: e.name || e.dir})),
        el("td", {class: "muted", text: e.dir}),
        el("td", {class: "state-" + e.state, text: e.state + (e.error ? ": " + e.error : "")}),
        el("td", {class: "progress"}, bar, " " + progress(e)),
        el("td", {class: "num", text: fmt(c.pending || 0)}),
        el("td", {class: "num", text: fmt(c.running || 0)}),
        el("td", {class: "num", text: fmt(c.paused || 0)}),
        el("td", {class: "num", text: fmt(c.completed || 0)}),
        el("td", {class: "num", text: fmt(c.stopped || 0)}),
        el("td", {class: "num", text: fmt(c.failed || 0)}),
        el("td", {class: "best"}, best));
    });
    table.replaceChildren(head, ...rows);
  };
}

// ---- one experiment --------------------------------------------------------

const PAGES = [
  ["trials", "Trials"], ["history", "History"], ["curves", "Learning curves"],
  ["parallel", "Parallel coordinates"], ["importance", "Importance"],
  ["packing", "GPU packing"], ["nodes", "Nodes and GPUs"],
];

// Trials that ended (completed, stopped early or failed), and the same words for it on every
// page: "21 of 32 trials ended", where 32 is every trial the store holds.
function ended(s) {
  const c = s.counts || {};
  return (c.completed || 0) + (c.stopped || 0) + (c.failed || 0);
}
function progress(s) { return ended(s) + " of " + count(s.total || 0, "trial") + " ended"; }

function summaryLine(s) {
  const c = s.counts || {};
  const parts = [s.state, progress(s)];
  for (const k of ["running", "paused", "pending", "completed", "stopped", "failed"])
    if (c[k]) parts.push(c[k] + " " + (k === "stopped" ? "stopped early" : k));
  parts.push(s.best ? "best " + s.metric + " " + fmt(s.best.value) + " (trial " + s.best.trial +
                      (s.best.state === "paused" || s.best.state === "running" ?
                       ", " + s.best.state + ", rung " + fmt(s.best.rung) + (s.best.budget ? ", budget " + fmt(s.best.budget) : "") : "") + ")"
                    : s.state === "running" ? "no value yet" : "no value");
  return parts.join(" · ");
}

function experimentFrame(id, page, body) {
  const title = el("h1", {id: "title"});
  const summary = el("p", {id: "summary", class: "muted"});
  view.replaceChildren(title, summary, body);
  tabs.replaceChildren(...PAGES.map(([k, label]) =>
    el("a", {href: "#/e/" + id + "/" + k, class: k === page ? "on" : "", text: label})));
  return async () => {
    const s = await getJSON("/api/e/" + id + "/summary");
    title.textContent = s.name;
    summary.textContent = summaryLine(s);
    summary.dataset.total = s.total;
    summary.dataset.best = s.best ? s.best.value : "";
  };
}

function trialsView(id) {
  const state = {sort: "id", desc: 0, offset: 0, limit: 100};
  const stateSel = el("select", {id: "state-filter"},
    ...["", "pending", "running", "paused", "completed", "stopped", "failed"].map(s =>
      el("option", {value: s, text: s || "every state"})));
  const search = el("input", {id: "text-filter", placeholder: "filter: parameter, decision or error"});
  const pager = el("span", {class: "muted", id: "pager"});
  const prev = el("button", {text: "‹", onclick: () => { state.offset = Math.max(0, state.offset - state.limit); refresh(); }});
  const next = el("button", {text: "›", onclick: () => { state.offset += state.limit; refresh(); }});
  const table = el("table", {id: "trials"});
  const body = el("div", {}, el("div", {class: "controls"}, stateSel, search, prev, next, pager), table);
  stateSel.addEventListener("change", () => { state.offset = 0; refresh(); });
  search.addEventListener("input", () => { state.offset = 0; refresh(); });
  const frame = experimentFrame(id, "trials", body);
  const cols = [["id", "trial", 1], ["state", "state", 1], ["attempts", "attempts", 1],
    ["rung", "rung / budget", 1], ["value", "value", 1], [null, "parameters"],
    [null, "last decision"], [null, "node / GPU"], ["duration", "time", 1], [null, "logs"]];
  async function refresh() {
    const q = new URLSearchParams({sort: state.sort, desc: state.desc, offset: state.offset,
                                   limit: state.limit, state: stateSel.value, q: search.value});
    if (!stateSel.value) q.delete("state");
    if (!search.value) q.delete("q");
    const [page] = await Promise.all([getJSON("/api/e/" + id + "/trials?" + q), frame()]);
    pager.textContent = page.matched ? (page.offset + 1) + "–" + (page.offset + page.rows.length) +
      " of " + page.matched + (page.matched !== page.total ? " matching (" + page.total + " in all)" : "") : "no trial";
    table.dataset.total = page.total;
    const head = el("tr", {}, ...cols.map(([key, label]) => {
      const th = el("th", {class: key ? "sort" : "", text: label + (key === state.sort ? (state.desc ? " ▾" : " ▴") : "")});
      if (key) th.addEventListener("click", () => {
        state.desc = state.sort === key ? 1 - state.desc : 0; state.sort = key; refresh();
      });
      return th;
    }));
    const rows = page.rows.map(r => el("tr", {"data-trial-id": r.id},
      el("td", {class: "num"}, el("a", {href: "#/e/" + id + "/trial/" + r.id, text: String(r.id)})),
      el("td", {class: "state-" + r.state, text: r.state}),
      el("td", {class: "num", text: fmt(r.attempts)}),
      el("td", {class: "num", text: rungBudget(r)}),
      el("td", {class: "num value", text: fmt(r.value)}),
      el("td", {class: "params", text: fmtParams(r.params)}),
      el("td", {text: r.error ? r.error : fmt(r.decision)}),
      el("td", {text: where(r)}),
      el("td", {class: "num", text: duration(r.run_s)}),
      el("td", {}, el("a", {href: "#/e/" + id + "/trial/" + r.id, text: "logs"}))));
    table.replaceChildren(head, ...rows);
  }
  return refresh;
}

function chartView(id, page, svgPath, note) {
  const box = el("div", {class: "chart", id: "chart"});
  const frame = experimentFrame(id, page, el("div", {}, note ? el("p", {class: "muted", text: note}) : null, box));
  return async () => {
    const [svg] = await Promise.all([getText("/api/e/" + id + "/" + svgPath), frame()]);
    box.innerHTML = svg;
  };
}

function importanceView(id) {
  const box = el("div", {class: "chart", id: "chart"});
  const method = el("p", {class: "muted", id: "method"});
  const frame = experimentFrame(id, "importance", el("div", {}, method, box));
  return async () => {
    const [imp, svg] = await Promise.all([getJSON("/api/e/" + id + "/importance"),
      getText("/api/e/" + id + "/importance.svg"), frame()]);
    method.textContent = "How it is computed: " + imp.method + ".";
    box.innerHTML = svg;
  };
}

function nodesView(id) {
  const nodes = el("table", {id: "nodes"}), gpus = el("table", {id: "gpus"});
  const sharing = el("p", {class: "muted", id: "sharing"});
  const noGpus = el("p", {id: "no-gpus", hidden: ""});
  const frame = experimentFrame(id, "nodes", el("div", {}, el("h2", {text: "Nodes"}), nodes,
    el("h2", {text: "GPUs"}), sharing, noGpus, gpus));
  return async () => {
    const [n] = await Promise.all([getJSON("/api/e/" + id + "/nodes"), frame()]);
    const list = Array.isArray(n.gpus) ? n.gpus : [];
    const nodeList = Array.isArray(n.nodes) ? n.nodes : [];
    // A machine without GPUs says so, rather than showing an empty table.
    noGpus.hidden = list.length > 0;
    gpus.hidden = list.length === 0;
    noGpus.textContent = nodeList.length ?
      (nodeList.length === 1 ? "This node has no GPU" : "No node has a GPU") + ": the trials run on CPUs only." :
      "No node has been seen yet.";
    sharing.textContent = "sharing: " + fmt(n.sharing || "none recorded") + " · policy: " + fmt(n.policy || "?");
    nodes.replaceChildren(el("tr", {}, ...["node", "state", "CPUs", "memory", "GPUs", "running", "restarts", "Slurm job"].map(h => el("th", {text: h}))),
      ...nodeList.map(x => el("tr", {},
        el("td", {text: fmt(x.name)}), el("td", {text: fmt(x.state)}), el("td", {class: "num", text: fmt(x.cpus)}),
        el("td", {class: "num", text: x.memory_mib ? (x.memory_mib / 1024).toFixed(1) + " GiB" : "not reported"}),
        el("td", {class: "num", text: fmt(x.gpus)}), el("td", {class: "num", text: fmt(x.running)}),
        el("td", {class: "num", text: fmt(x.restarts)}), el("td", {text: fmt(x.slurm_job || "")}))));
    gpus.replaceChildren(el("tr", {}, ...["node", "GPU", "type", "memory used / total", "utilisation", "health", "foreign use", "our trials"].map(h => el("th", {text: h}))),
      ...list.map(g => el("tr", {},
        el("td", {text: fmt(g.node || "")}), el("td", {class: "num", text: fmt(g.index)}), el("td", {text: fmt(g.type)}),
        el("td", {class: "num", text: fmt(g.memory_used_mib) + " / " + fmt(g.memory_mib) + " MiB"}),
        el("td", {class: "num", text: fmt(g.util) + " %"}),
        el("td", {class: g.healthy ? "" : "error", text: g.healthy ? "healthy" : "UNHEALTHY " + fmt(g.error || "")}),
        el("td", {text: g.foreign_mib ? fmt(g.foreign_mib) + " MiB " + fmt(g.foreign || "") : "none"}),
        el("td", {text: (g.trials || []).join(", ")}))));
  };
}

function trialView(id, trial) {
  const info = el("dl", {class: "kv", id: "trial-info"});
  const box = el("div", {class: "chart", id: "chart"});
  const noCurve = el("p", {class: "muted", id: "no-curve", hidden: ""});
  const values = el("table", {id: "curve"});
  const valuesTitle = el("h2", {text: "Intermediate values"});
  const events = el("table", {id: "events"});
  const logs = el("pre", {class: "log", id: "log"});
  const streamSel = el("select", {id: "stream"}, el("option", {value: "stdout", text: "stdout"}),
                       el("option", {value: "stderr", text: "stderr"}));
  const logPath = el("span", {class: "muted", id: "log-path"});
  let next = -1;
  let chosen = false;  // the stream was picked: by the reader, or once stdout was seen empty
  streamSel.addEventListener("change", () => { next = -1; logs.textContent = ""; chosen = true; });
  const frame = experimentFrame(id, "trials", el("div", {},
    el("h2", {text: "Trial " + trial}), info, el("h2", {text: "Learning curve"}), noCurve, box,
    el("h2", {text: "Log (live tail)"}), el("div", {class: "controls"}, streamSel, logPath), logs,
    valuesTitle, values, el("h2", {text: "Events"}), events));
  const base = "/api/e/" + id;
  async function tail() {
    const lg = await getJSON(base + "/log/" + trial + "?stream=" + streamSel.value + "&from=" + next);
    if (chosen || lg.size > 0 || streamSel.value !== "stdout") return lg;
    // Nothing on stdout: open on stderr when it has something (a traceback, say).
    const err = await getJSON(base + "/log/" + trial + "?stream=stderr&from=-1");
    if (err.size === 0) return lg;
    chosen = true;
    streamSel.value = "stderr";
    logs.textContent = "";
    return err;
  }
  return async () => {
    const [t, lg] = await Promise.all([getJSON(base + "/trial/" + trial), tail(), frame()]);
    // A trial with no value reported gets a sentence, not an empty plot.
    const svg = t.curve.length ? await getText(base + "/curves.svg?trials=" + trial) : "";
    const kv = [["state", t.state], ["value", fmt(t.value)], ["attempts", fmt(t.attempts)],
      ["rung / budget", rungBudget(t)],
      ["last decision", fmt(t.decision)], ["error", fmt(t.error), "text"],
      ["parameters", fmtParams(t.params)], ["placed on", where(t)],
      ["running time", duration(t.run_s)], ["interrupted attempts", fmt(t.interrupted)],
      ["last lines of stderr at its last failure", fmt(t.stderr_tail), "text", "stderr-tail"]];
    info.replaceChildren(...kv.flatMap(([k, v, cls, key]) => [el("dt", {text: k}),
      el("dd", Object.assign({text: v || ""}, cls ? {class: cls} : {}, key ? {id: key} : {}))]));
    noCurve.hidden = t.curve.length > 0;
    noCurve.textContent = t.state === "failed" ? "It failed before it reported a value, so there is no curve." : "It has reported no value yet, so there is no curve.";
    box.hidden = values.hidden = valuesTitle.hidden = !t.curve.length;
    box.innerHTML = svg;
    values.dataset.points = t.curve.length;
    values.replaceChildren(el("tr", {}, el("th", {class: "num", text: "step"}), el("th", {class: "num", text: "value"})),
      ...t.curve.map(([s, v]) => el("tr", {}, el("td", {class: "num", text: fmt(s)}), el("td", {class: "num", text: fmt(v)}))));
    events.replaceChildren(el("tr", {}, ...["attempt", "event", "detail"].map(h => el("th", {text: h}))),
      ...t.events.map(e => el("tr", {}, el("td", {class: "num", text: fmt(e.attempt)}),
        el("td", {text: e.kind}), el("td", {text: fmt(e.detail)}))));
    if (lg.from !== next) logs.textContent = "";
    logs.textContent += lg.text;
    if (logs.textContent.length > 200000) logs.textContent = logs.textContent.slice(-100000);
    next = lg.next;
    logPath.textContent = lg.path + (lg.size ? "" : " (empty)");
  };
}

// ---- routing and the live loop ---------------------------------------------

function route() {
  const h = location.hash.replace(/^#\/?/, "").split("/");
  tabs.replaceChildren();
  if (h[0] !== "e" || h[1] === undefined) return experimentsView();
  const id = h[1], page = h[2] || "trials";
  switch (page) {
    case "trial": return trialView(id, h[3]);
    case "history": return chartView(id, page, "history.svg");
    case "curves": return chartView(id, page, "curves.svg", "The ten best trials and the latest running ones; open a trial for its own curve.");
    case "parallel": return chartView(id, page, "parcoords.svg");
    case "importance": return importanceView(id);
    case "packing": return chartView(id, page, "packing.svg", "Each bar is one attempt on one device (a GPU, or a node's CPUs), from its placement to its end; under each GPU, the memory and compute given to the trials placed there.");
    case "nodes": return nodesView(id);
    default: return trialsView(id);
  }
}

async function tick() {
  if (busy || !current) return;
  busy = true;
  try {
    await current();
    live.textContent = "live · " + new Date().toLocaleTimeString();
    live.className = "";
    document.body.dataset.loaded = "1";
  } catch (e) {
    live.textContent = "not updating: " + e.message;
    live.className = "stale";
  } finally {
    busy = false;
  }
}

function go() { current = route(); tick(); }
window.addEventListener("hashchange", go);
setInterval(tick, POLL_MS);
go();
