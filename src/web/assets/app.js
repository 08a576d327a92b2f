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
  const note = el("p", {id: "plan-note", class: "muted"});
  view.replaceChildren(el("h1", {text: "Experiments"}), table, note);
  return async () => {
    const {experiments} = await getJSON("/api/experiments");
    const head = el("tr", {}, ...["name", "directory", "state", "trials ended", "pending", "running",
      "paused", "completed", "stopped early", "failed", "best", "end: planned / now expected"]
      .map(h => el("th", {text: h})));
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
        el("td", {class: "best"}, best),
        planCell(e));
    });
    table.replaceChildren(head, ...rows);
    const planned = experiments.some(e => e.plan);
    note.textContent = planned ? PLAN_NOTE : "";
  };
}

// The plan `tunepack plan EXPERIMENT` kept in the store beside the run: the end it predicted
// (the run's start + its makespan, median and 90% range over simulated searches) against the
// end the run's pace so far points to.
const PLAN_NOTE = "Planned end: the run's start plus the makespan `tunepack plan` predicted " +
  "(median, and the 90% range of its simulated searches). Now expected: the run's start plus " +
  "the time elapsed × (trials the search runs ÷ trials ended so far), which assumes the trials " +
  "left take as long, on average, as those ended; once the run has ended, its end.";

function clock(t) {
  const d = new Date(t * 1000), now = new Date();
  const time = d.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
  return d.toDateString() === now.toDateString() ? time : d.toLocaleDateString() + " " + time;
}

function planCell(e) {
  const td = el("td", {class: "plan"});
  const p = e.plan;
  if (!p) return td;
  td.dataset.planned = p.end.median;
  // a type named to `plan --gpu-type`; else the GPUs the times were measured on, or declared
  const named = p.gpu_type && p.gpu_type !== "measured" && p.gpu_type !== "declared";
  const gpus = p.gpus + (named ? " " + p.gpu_type : "") + " GPU" + (p.gpus === 1 ? "" : "s");
  td.append(el("div", {class: "planned", text: "planned " + clock(p.end.median) + " (90%: " +
                       clock(p.end.lo) + " to " + clock(p.end.hi) + ", " + gpus + ")"}));
  const x = p.estimate;
  let text;
  if (x.how === "ended") text = "ended " + clock(x.end);
  else if (x.how === "pace") text = "now expected " + clock(x.end) + " (" + x.ended + " of " +
                                    x.of + " trials ended in " + duration(x.elapsed_s) + ")";
  else text = "now expected: not yet, no trial has ended";
  if (x.end !== null) td.dataset.estimate = x.end;
  const late = x.end !== null && x.end > p.end.hi;
  td.append(el("div", {class: "estimate" + (late ? " late" : ""), text}));
  return td;
}

// ---- one experiment --------------------------------------------------------

const PAGES = [
  ["trials", "Trials"], ["history", "History"], ["curves", "Learning curves"],
  ["parallel", "Parallel coordinates"], ["importance", "Importance"],
  ["plots", "Slice and contour"],
  ["packing", "GPU packing"], ["nodes", "Nodes and GPUs"], ["front", "Pareto front"],
  ["lineage", "Lineage"],
];
// Experiments with several objectives (known from their summaries): only they get a front tab;
// experiments whose population-based training exploited (hasExploits) get a lineage tab.
const multiObjective = {}, hasExploits = {};

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
  // Several objectives have no one best: the front is (its own page).
  if ((s.objectives || []).length > 1)
    parts.push(s.objectives.length + " objectives, " + s.objectives.map(o => o.name + " (" + o.mode + ")").join(", ") +
               ": no one best trial, see the Pareto front");
  else parts.push(s.best ? "best " + s.metric + " " + fmt(s.best.value) + " (trial " + s.best.trial +
                      (s.best.state === "paused" || s.best.state === "running" ?
                       ", " + s.best.state + ", rung " + fmt(s.best.rung) + (s.best.budget ? ", budget " + fmt(s.best.budget) : "") : "") + ")"
                    : s.state === "running" ? "no value yet" : "no value");
  if (s.feasibility && s.feasibility.infeasible)  // constraints: only feasible trials rank
    parts.push(s.feasibility.infeasible + " of " + s.feasibility.finished + " finished infeasible (" +
               s.feasibility.constraints.map(c => c.metric + ("min" in c ? " ≥ " + fmt(c.min) : "") +
                                              ("max" in c ? " ≤ " + fmt(c.max) : "")).join(", ") + "), not ranked");
  return parts.join(" · ");
}

function experimentFrame(id, page, body) {
  const title = el("h1", {id: "title"});
  const summary = el("p", {id: "summary", class: "muted"});
  view.replaceChildren(title, summary, body);
  // The pages that draw trials carry the brush (brush.js) from tab to tab.
  const tabHref = k => {
    const b = BRUSHED_PAGES.includes(k) ? String(brushNow()) : "";
    return "#/e/" + id + "/" + k + (b ? "?" + b : "");
  };
  const syncTabs = () => tabs.querySelectorAll("a[data-page]").forEach(a => a.setAttribute("href", tabHref(a.dataset.page)));
  const pageTabs = () => tabs.replaceChildren(...PAGES
    .filter(([k]) => (k !== "front" || multiObjective[id]) && (k !== "lineage" || hasExploits[id]))
    .map(([k, label]) => el("a", {href: tabHref(k), "data-page": k, class: k === page ? "on" : "", text: label,
                                  onmousedown: syncTabs, onclick: syncTabs})));
  pageTabs();
  return async () => {
    const s = await getJSON("/api/e/" + id + "/summary");
    const multi = (s.objectives || []).length > 1;
    const exploits = (s.exploits || 0) > 0;
    if (multi !== !!multiObjective[id] || exploits !== !!hasExploits[id]) {
      multiObjective[id] = multi;
      hasExploits[id] = exploits;
      pageTabs();
    }
    syncTabs();
    title.textContent = s.name;
    summary.textContent = summaryLine(s);
    summary.dataset.total = s.total;
    summary.dataset.best = s.best ? s.best.value : "";
  };
}

// ---- the trials table ------------------------------------------------------
// A column per parameter and per metric; sorted, filtered and paged by the server
// (/api/e/ID/trials; the columns from /api/e/ID/columns). The view lives in the URL's hash (#/e/ID/trials?sort=p:lr&desc=1&
// state=completed&q=adam&min.p:lr=0.001&max.value=0.5&offset=100), so that a reload or a
// shared link shows the same rows.

const STATES = ["", "pending", "running", "paused", "completed", "stopped", "failed", "interrupted"];
// Under constraints, the feasible filter (feasible=yes|no|unjudged in the URL).
const FEASIBLE = [["", "any"], ["yes", "feasible"], ["no", "infeasible"], ["unjudged", "not judged yet"]];

// A plain click on a link of the table's view: changed in place (a modified click opens the
// link, say in a new tab, as the browser does).
function inPlace(e) {
  if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return false;
  e.preventDefault();
  return true;
}

// Under constraints, a trial's standing (r.feasible, r.constraints: each one's value in the
// last report and its violation) in words: "mem_gb = 9.5, above its max 5 by 4.5".
function violations(r) {
  return (r.constraints || []).filter(c => c.violation !== 0).map(c =>
    c.value === null ? c.metric + " never reported" :
    c.metric + " = " + fmt(c.value) + ("max" in c && c.value > c.max ? ", above its max " + fmt(c.max)
                                                                     : ", below its min " + fmt(c.min)) +
    " by " + fmt(c.violation)).join("; ");
}

// The feasible column: a marker on an infeasible trial, its tooltip the constraints it broke.
function feasibleCell(r) {
  if (r.feasible === false)
    return el("span", {class: "infeasible-mark", title: "infeasible: " + violations(r), text: "✗ infeasible"});
  if (r.feasible === true) return el("span", {class: "feasible-mark", title: "every constraint holds", text: "✓"});
  return "";
}

// The columns of a page: key (what the server sorts and filters by), label, the cell.
function tableColumns(cols) {
  const num = (key, label, cell, title) => ({key, label, cell, title, num: true, range: true});
  const objectives = cols.objectives || [];
  return [
    {key: "id", label: "trial", num: true, range: true,
     cell: (r, id) => el("a", {href: "#/e/" + id + "/trial/" + r.id, text: String(r.id)})},
    {key: "state", label: "state", cell: r => r.state, cls: r => "state-" + r.state},
    ...(cols.constraints ? [{key: "feasible", label: "feasible", cell: feasibleCell, cls: () => "feasible",
      title: "under the constraints (" + cols.constraints.map(c => c.metric).join(", ") +
             "), judged once a job ends: point at ✗ for what it broke; sorted feasible first"}] : []),
    num("value", objectives[0] || "value", r => fmt(r.value), "the objective" +
        (objectives.length > 1 ? " (the first of " + objectives.length + ")" : "") +
        ": its last reported value"),
    ...(cols.metrics || []).filter(m => m !== objectives[0]).map(m =>
      num("m:" + m, m, r => fmt((r.metrics || {})[m]),
          (objectives.includes(m) ? "an objective" : "a metric") + ": its value in the last report")),
    ...(cols.params || []).map(p => ({key: "p:" + p, label: p, range: true,
      title: "parameter", cell: r => fmt((r.params || {})[p]),
      num: r => typeof (r.params || {})[p] === "number"})),
    num("attempts", "attempts", r => fmt(r.attempts), "every start: the first, each promotion, each retry"),
    num("failures", "fails", r => fmt(r.failures), "attempts that failed"),
    num("retries", "retries", r => fmt(r.retries), "failed attempts run again (automatically or by run --retry-failed)"),
    num("rung", "rung / budget", rungBudget, "the rung and budget it reached"),
    num("promotions", "promotions", r => fmt(r.promotions), "attempts started by a promotion to a larger budget"),
    num("duration", "time", r => duration(r.run_s), "time spent running, every attempt"),
    {key: null, label: "node / GPU", cell: where},
    {key: null, label: "last decision or error", cell: r => r.error ? r.error : fmt(r.decision),
     cls: () => "note"},
  ];
}

function trialsView(id, query) {
  const v = new URLSearchParams(query || "");
  const limit = () => Math.min(500, Math.max(1, +v.get("limit") || 100));
  const offset = () => Math.max(0, +v.get("offset") || 0);
  const put = (k, val) => { if (val === "" || val === null || val === undefined) v.delete(k); else v.set(k, val); };
  // seq counts the changes of view: an answer to a view since changed is not drawn (one to the
  // same view is, whether the click or the second's refresh asked for it, whichever comes first).
  let seq = 0, shownKey = "", columns = [], lastPage = null, colsSeen = null, refreshes = 0;
  const hashOf = w => "#/e/" + id + "/trials" + (String(w) ? "?" + w : "");
  // A change of view: into the URL (without a new history entry or a hashchange), then a refresh.
  function changed(keepOffset) {
    if (!keepOffset) v.delete("offset");
    seq++;
    history.replaceState(null, "", hashOf(v));
    refresh(true).catch(e => { live.textContent = "not updating: " + e.message; live.className = "stale"; });
  }
  // The view with some of its arguments changed, as a link: what a click on it shows, so that
  // a sort or a page opens in a new tab too (a plain click changes the view in place).
  function linkTo(changes) {
    const w = new URLSearchParams(v);
    for (const [k, val] of Object.entries(changes)) if (val === "" || val === null) w.delete(k); else w.set(k, val);
    return hashOf(w);
  }
  // The sort a click on a column's label asks for: ascending, then descending.
  const sortBy = key => ({sort: key === "id" ? "" : key,
                          desc: (v.get("sort") || "id") === key && v.get("desc") !== "1" ? "1" : "", offset: ""});
  const search = el("input", {id: "text-filter", placeholder: "filter: parameter, decision or error",
                              value: v.get("q") || ""});
  search.addEventListener("input", () => { put("q", search.value); changed(); });
  const clear = el("button", {id: "clear-filters", text: "clear filters", onclick: () => {
    for (const k of [...v.keys()]) if (k !== "sort" && k !== "desc" && k !== "limit") v.delete(k);
    search.value = "";
    shownKey = "";  // rebuild the filter inputs empty
    changed();
  }});
  const pager = el("span", {class: "muted", id: "pager"});
  const pages = el("span", {id: "pages"});
  const prev = el("button", {id: "prev-page", text: "‹ previous", onclick: () => {
    put("offset", Math.max(0, offset() - limit()) || ""); changed(true); }});
  const next = el("button", {id: "next-page", text: "next ›", onclick: () => {
    if (lastPage && offset() + limit() < lastPage.matched) { put("offset", offset() + limit()); changed(true); } }});
  // Trials ticked to compare (2 to 4), kept in the URL as pick=3,7.
  const picked = new Set((v.get("pick") || "").split(",").filter(x => x).map(Number));
  const compare = el("a", {id: "compare-link"});
  const showPicked = () => {
    const ids = [...picked];
    put("pick", ids.join(","));
    history.replaceState(null, "", hashOf(v));
    compare.textContent = "compare " + ids.length + " selected" + (ids.length < 2 || ids.length > 4 ? " (tick 2 to 4)" : "");
    if (ids.length >= 2 && ids.length <= 4) compare.setAttribute("href", "#/e/" + id + "/compare?trials=" + ids.join(","));
    else compare.removeAttribute("href");
  };
  const pickColumn = {key: null, label: "", cell: r => {
    const box = el("input", {type: "checkbox", class: "pick", "data-trial": r.id, title: "compare this trial"});
    box.checked = picked.has(r.id);
    box.addEventListener("change", () => { if (box.checked) picked.add(r.id); else picked.delete(r.id); showPicked(); });
    return box;
  }};
  showPicked();
  const table = el("table", {id: "trials"});
  const thead = el("thead"), tbody = el("tbody");
  table.append(thead, tbody);
  const brushed = brushNote();
  const body = el("div", {}, brushed, el("div", {class: "controls"}, search, clear, prev, next, pager, pages, compare),
                  table);
  const frame = experimentFrame(id, "trials", body);

  // The two header rows: labels (click to sort) and filters (a state, or a range per column).
  function buildHead() {
    const labels = el("tr", {}), filters = el("tr", {class: "filters"});
    for (const c of columns) {
      const th = el("th", {class: (c.key ? "sort" : "") + (c.num === true ? " num" : ""),
                           title: c.title || ""}, c.key ? el("a", {text: c.label}) : c.label);
      if (c.key) {
        th.dataset.key = c.key;
        th.addEventListener("click", e => {
          if (!inPlace(e)) return;
          const to = sortBy(c.key);
          put("desc", to.desc);
          put("sort", to.sort);
          changed();
        });
      }
      labels.append(th);
      const f = el("th");
      if (c.key === "state") {
        const sel = el("select", {id: "state-filter"}, ...STATES.map(s =>
          el("option", {value: s, text: s || "every state"})));
        sel.value = v.get("state") || "";
        sel.addEventListener("change", () => { put("state", sel.value); changed(); });
        f.append(sel);
      } else if (c.key === "feasible") {
        const sel = el("select", {id: "feasible-filter"}, ...FEASIBLE.map(([k, label]) =>
          el("option", {value: k, text: label})));
        sel.value = v.get("feasible") || "";
        sel.addEventListener("change", () => { put("feasible", sel.value); changed(); });
        f.append(sel);
      } else if (c.range) {
        for (const side of ["min", "max"]) {
          const k = side + "." + c.key;
          const input = el("input", {class: "range", "data-range": k, placeholder: side,
                                     inputmode: "decimal", value: v.get(k) || ""});
          input.addEventListener("change", () => {
            const x = input.value.trim();
            input.classList.toggle("error", x !== "" && !isFinite(+x));
            if (x === "" || isFinite(+x)) { put(k, x); changed(); }
          });
          f.append(input);
        }
      }
      filters.append(f);
    }
    thead.replaceChildren(labels, filters);
  }
  function markSort(page) {
    for (const th of thead.querySelectorAll("th[data-key]")) {
      const c = columns.find(x => x.key === th.dataset.key), a = th.firstChild;
      a.textContent = c.label + (th.dataset.key === page.sort ? (page.desc ? " ▾" : " ▴") : "");
      a.setAttribute("href", linkTo(sortBy(c.key)));
      th.classList.toggle("sorted", th.dataset.key === page.sort);
    }
  }
  // Links to the first and last pages and the two either side of this one: "1 … 4 5 6 7 8 … 40".
  function pageLinks(page) {
    const n = Math.ceil(page.matched / limit()), at = Math.floor(page.offset / limit());
    const kids = [];
    let gap = false;
    for (let i = 0; i < n; i++) {
      if (i !== 0 && i !== n - 1 && Math.abs(i - at) > 2) { gap = true; continue; }
      if (gap) kids.push(el("span", {class: "muted", text: "…"}));
      gap = false;
      if (i === at) { kids.push(el("b", {"data-page": i + 1, text: String(i + 1)})); continue; }
      const off = i * limit();
      kids.push(el("a", {href: linkTo({offset: off || ""}), "data-page": i + 1, text: String(i + 1),
                         onclick: e => {
                           if (!inPlace(e)) return;
                           put("offset", off || "");
                           changed(true);
                         }}));
    }
    pages.replaceChildren(...(n > 1 ? kids : []));
  }

  // clicked: a change of view, whose rows are drawn as soon as they come (the summary and the
  // columns wait for the next second's refresh).
  async function refresh(clicked) {
    const mine = seq;
    const q = new URLSearchParams(v);
    q.set("limit", limit());
    // The columns take a read of every trial: asked for at first, then every ten refreshes.
    const askCols = !colsSeen || (!clicked && refreshes++ % 10 === 0);
    const [page, cols] = await Promise.all([getJSON("/api/e/" + id + "/trials?" + q),
      askCols ? getJSON("/api/e/" + id + "/columns") : colsSeen, clicked ? null : frame()]);
    if (mine !== seq) return;  // the view changed since: its own answer is on its way
    lastPage = page;
    colsSeen = cols;
    const key = JSON.stringify(cols);
    if (key !== shownKey) {
      columns = [pickColumn, ...tableColumns(cols)];
      shownKey = key;
      buildHead();
    }
    markSort(page);
    showBrush(brushed, id, "trials", v);
    pager.textContent = page.matched ? (page.offset + 1) + "–" + (page.offset + page.rows.length) +
      " of " + page.matched + (page.matched !== page.total ? " matching (" + page.total + " in all)" : "") : "no trial matches";
    pageLinks(page);
    prev.disabled = page.offset === 0;
    next.disabled = page.offset + page.rows.length >= page.matched;
    table.dataset.total = page.total;
    table.dataset.matched = page.matched;
    tbody.replaceChildren(...page.rows.map(r => el("tr", {"data-trial-id": r.id}, ...columns.map(c => {
      const n = typeof c.num === "function" ? c.num(r) : c.num;
      const td = el("td", {class: [n ? "num" : "", c.cls ? c.cls(r) : ""].join(" ").trim()},
                    c.cell(r, id));
      if (c.key) td.dataset.key = c.key;
      return td;
    }))));
  }
  return refresh;
}

// A chart drawn by the server; on the pages that draw trials, of the brushed set (brush.js).
function chartView(id, page, svgPath, note, query) {
  const v = new URLSearchParams(query || "");
  const box = el("div", {class: "chart", id: "chart"});
  const brushed = brushNote();
  const frame = experimentFrame(id, page, el("div", {}, brushed, note ? el("p", {class: "muted", text: note}) : null, box));
  return async () => {
    const [svg] = await Promise.all([getText("/api/e/" + id + "/" + withBrush(svgPath, v)), frame()]);
    showBrush(brushed, id, page, v);
    box.innerHTML = svg;
  };
}

// Importance over the brushed set (brush.js), grown anew on it by the server; with fewer than
// imp.min_trials trials there is none, and the page says why.
function importanceView(id, query) {
  const v = new URLSearchParams(query || "");
  const box = el("div", {class: "chart", id: "chart"});
  const method = el("p", {class: "muted", id: "method"});
  const few = el("p", {id: "importance-note", hidden: ""});
  const table = el("table", {id: "importance"});
  const brushed = brushNote();
  const frame = experimentFrame(id, "importance", el("div", {}, brushed, method, few, box, table));
  return async () => {
    const [imp, svg] = await Promise.all([getJSON(withBrush("/api/e/" + id + "/importance", v)),
      getText(withBrush("/api/e/" + id + "/importance.svg", v)), frame()]);
    showBrush(brushed, id, "importance", v);
    method.textContent = "How it is computed: " + imp.method + ".";
    few.hidden = !imp.note;
    few.textContent = imp.note ? imp.note[0].toUpperCase() + imp.note.slice(1) + "." +
      (imp.brushed ? " Widen the brush or clear it." : " It comes once more trials have a value.") : "";
    table.dataset.trials = imp.trials;
    box.innerHTML = svg;
    // The server sends them the most important first.
    table.replaceChildren(el("tr", {}, ...["parameter", "importance (forest)", "alone (eta\u00b2)"]
      .map(h => el("th", {text: h}))), ...imp.params.map(p => el("tr", {"data-param": p.name},
      el("td", {text: p.name}), el("td", {text: p.importance.toFixed(3)}),
      el("td", {text: p.alone.toFixed(3)}))));
  };
}

// The objective against one parameter (slice) and a pair (contour), both drawn by the server;
// the parameters chosen are kept in the URL (#/e/ID/plots?param=lr&x=lr&y=dropout).
function plotsView(id, query) {
  const v = new URLSearchParams(query || "");
  const pick = (idName, key) => {
    const s = el("select", {id: idName});
    s.addEventListener("change", () => { v.set(key, s.value); location.hash = "#/e/" + id + "/plots?" + v; });
    return s;
  };
  const sliceSel = pick("slice-param", "param"), xSel = pick("contour-x", "x"), ySel = pick("contour-y", "y");
  const slice = el("div", {class: "chart", id: "slice"}), contour = el("div", {class: "chart", id: "contour"});
  const brushed = brushNote();
  const frame = experimentFrame(id, "plots", el("div", {}, brushed,
    el("p", {}, el("label", {text: "Slice: the objective against "}), sliceSel), slice,
    el("p", {}, el("label", {text: "Contour: the mean objective over "}), xSel,
      el("label", {text: " and "}), ySel), contour));
  let drawn = "";
  return async () => {
    const [cols] = await Promise.all([getJSON("/api/e/" + id + "/columns"), frame()]);
    const params = cols.params || [];
    if (!params.length) { slice.textContent = "No parameters yet."; return; }
    const has = k => params.includes(v.get(k));
    const p = has("param") ? v.get("param") : params[0];
    const x = has("x") ? v.get("x") : params[0];
    const y = has("y") ? v.get("y") : params[Math.min(1, params.length - 1)];
    for (const [sel, val] of [[sliceSel, p], [xSel, x], [ySel, y]]) {
      if (sel.options.length !== params.length)
        sel.replaceChildren(...params.map(n => el("option", {value: n, text: n})));
      sel.value = val;
    }
    const q = "slice.svg?param=" + encodeURIComponent(p) + "&x=" + encodeURIComponent(x) + "&y=" + encodeURIComponent(y);
    showBrush(brushed, id, "plots", v);
    // The brushed set (brush.js) only.
    const [s1, s2] = await Promise.all([
      getText(withBrush("/api/e/" + id + "/slice.svg?param=" + encodeURIComponent(p), v)),
      getText(withBrush("/api/e/" + id + "/contour.svg?x=" + encodeURIComponent(x) + "&y=" + encodeURIComponent(y), v))]);
    if (q + s1.length + s2.length === drawn) return;  // unchanged: keep the tooltips open
    drawn = q + s1.length + s2.length;
    slice.innerHTML = s1;
    contour.innerHTML = s2;
  };
}

// 2 to 4 trials side by side (#/e/ID/compare?trials=3,7): their parameters (a row where they
// differ is marked), their learning curves overlaid (drawn by the server), and the scheduler's
// decisions about each.
function compareView(id, query) {
  const ids = (new URLSearchParams(query || "").get("trials") || "").split(",").filter(x => /^\d+$/.test(x)).slice(0, 4);
  const params = el("table", {id: "compare-params"});
  const box = el("div", {class: "chart", id: "chart"});
  const decisions = el("div", {id: "compare-decisions", class: "compare"});
  const frame = experimentFrame(id, "compare", el("div", {},
    el("p", {class: "muted", text: "Trials " + ids.join(", ") + " side by side; tick others in the trials table."}),
    params, box, el("h2", {text: "Decisions"}), decisions));
  return async () => {
    const [trials, svg] = await Promise.all([Promise.all(ids.map(t => getJSON("/api/e/" + id + "/trial/" + t))),
      getText("/api/e/" + id + "/curves.svg?trials=" + ids.join(",")), frame()]);
    const names = [...new Set(trials.flatMap(t => Object.keys(t.params || {})))];
    const row = (label, cells, cls) => el("tr", {class: cls || ""}, el("th", {text: label}), ...cells.map(c => el("td", {text: c})));
    params.replaceChildren(
      el("tr", {}, el("th", {text: "trial"}), ...trials.map(t => el("th", {}, el("a", {href: "#/e/" + id + "/trial/" + t.id, text: String(t.id)})))),
      row("state", trials.map(t => t.state)),
      row("value", trials.map(t => fmt(t.value))),
      ...names.map(n => {
        const vals = trials.map(t => fmt((t.params || {})[n]));
        const tr = row(n, vals, new Set(vals).size > 1 ? "differs" : "");
        tr.dataset.param = n;
        return tr;
      }));
    box.innerHTML = svg;
    decisions.replaceChildren(...trials.map(t => el("div", {"data-trial": t.id},
      el("h3", {text: "trial " + t.id}),
      el("table", {}, el("tr", {}, ...["rung", "budget", "decision", "value", "detail"].map(h => el("th", {text: h}))),
        ...(t.decisions || []).map(d => el("tr", {class: "decision"}, el("td", {text: fmt(d.rung)}),
          el("td", {text: fmt(d.budget)}), el("td", {text: d.kind}), el("td", {text: fmt(d.value)}),
          el("td", {text: fmt(d.detail)})))))));
  };
}

// Several objectives: the front drawn by the server (every point a link to its trial), and
// the trials on it. An experiment with one objective has none, and the page says so.
const FRONT_ROWS = 100;  // the front's table: its first rows (the chart has every point)
function frontView(id) {
  const note = el("p", {class: "muted", id: "front-note"});
  const box = el("div", {class: "chart", id: "chart"});
  const list = el("table", {id: "front"});
  const listTitle = el("h2", {text: "Trials on the front"});
  const frame = experimentFrame(id, "front", el("div", {}, note, box, listTitle, list));
  let shown = null;  // the SVG in the box: redrawn only when it changes (hover keeps its tooltip)
  let asked = {key: "", at: 0};  // the chart is asked for again when the counts change, or after 10 s
  return async () => {
    const r = await fetch("/api/e/" + id + "/front?limit=" + FRONT_ROWS, {credentials: "same-origin"});
    const f = await r.json();
    await frame();
    if (!r.ok) {
      note.textContent = f.error || r.statusText;
      box.replaceChildren();
      list.replaceChildren();
      listTitle.hidden = true;
      shown = null;
      return;
    }
    const key = [f.finished, f.on_front, f.infeasible].join("/");
    let svg = shown;
    if (shown === null || key !== asked.key || Date.now() - asked.at > 10000) {
      svg = await getText("/api/e/" + id + "/front.svg");
      asked = {key, at: Date.now()};
    }
    const names = f.objectives.map(o => o.name);
    note.textContent = count(f.on_front, "trial") + " of " + f.finished + " finished on the Pareto front of " +
      f.objectives.map(o => o.name + " (" + o.mode + ")").join(", ") + ": no other trial is better in every objective. " +
      "Point at a trial for its values; click it for its page." + (f.infeasible ? " " + f.infeasible + " infeasible (x) are on no front." : "");
    if (svg !== shown) { box.innerHTML = svg; shown = svg; }
    listTitle.hidden = false;
    listTitle.textContent = "Trials on the front, by " + names[0] + " (best first)" +
      (f.on_front > f.front.length ? ": the first " + f.front.length + " of " + f.on_front : "");
    const rows = f.front;
    list.replaceChildren(el("tr", {}, el("th", {text: "trial"}), ...names.map(n => el("th", {class: "num", text: n}))),
      ...rows.map(p => el("tr", {"data-trial": p.trial},
        el("td", {}, el("a", {href: "#/e/" + id + "/trial/" + p.trial, text: "trial " + p.trial})),
        ...names.map(n => el("td", {class: "num", text: fmt(p.values[n])})))));
  };
}

// Population-based training: each trial a lane over the budget, its segments coloured by the
// objective, each exploit an arrow from its donor (the server draws it; the note counts).
function lineageView(id) {
  const note = el("p", {class: "muted", id: "lineage-note"});
  const box = el("div", {class: "chart", id: "chart"});
  const frame = experimentFrame(id, "lineage", el("div", {}, note, box));
  let shown = null;  // redrawn only when it changes (hover keeps its tooltip)
  return async () => {
    const [l, svg] = await Promise.all([getJSON("/api/e/" + id + "/lineage"),
      getText("/api/e/" + id + "/lineage.svg"), frame()]);
    note.textContent = count(l.trials.length, "trial") + ", " + count(l.exploits.length, "exploit") +
      ". Each lane is a trial over the budget, coloured by " + l.metric + " (red worst, green best); " +
      "each arrow copies a donor's checkpoint at a step into another trial, which goes on with " +
      "explored parameters. Point at an arrow for what changed.";
    if (svg !== shown) { box.innerHTML = svg; shown = svg; }
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

// Under constraints, a constraint's bound in words ("≤ 5", "≥ 1", "1 to 8") and its margin:
// how far the value lies inside its nearest bound (negative: outside it by that much).
function boundText(c) {
  return "min" in c && "max" in c ? fmt(c.min) + " to " + fmt(c.max) :
         "max" in c ? "≤ " + fmt(c.max) : "≥ " + fmt(c.min);
}
function margin(c) {
  return Math.min("max" in c ? c.max - c.value : Infinity, "min" in c ? c.value - c.min : Infinity);
}

// A trial's standing on its own page: in a sentence, then each constraint's value, bound and margin.
function feasibilityOf(t, line, table) {
  line.textContent = t.feasible === true ? "Feasible: every constraint holds in its last report." :
    t.feasible === false ? "Infeasible: " + violations(t) + "." :
    "Not judged yet: feasibility is judged once a job of the trial ends with its result" +
    (t.state === "failed" ? " (it failed)." : ".");
  line.className = t.feasible === false ? "infeasible-mark" : t.feasible === true ? "feasible-mark" : "muted";
  line.dataset.feasible = String(t.feasible);
  table.replaceChildren(el("tr", {}, ...["constraint", "value", "bound", "margin", ""].map((h, i) =>
    el("th", {text: h, class: i >= 1 && i <= 3 ? "num" : ""}))),
    ...t.constraints.map(c => {
      const m = c.value === null ? null : margin(c);
      return el("tr", {"data-metric": c.metric},
        el("td", {text: c.metric}),
        el("td", {class: "num", text: c.value === null ? "never reported" : fmt(c.value)}),
        el("td", {class: "num", text: boundText(c)}),
        el("td", {class: "num", text: m === null ? "" : fmt(m),
                  title: m === null ? "" : m >= 0 ? fmt(m) + " inside its bound" : "outside its bound by " + fmt(-m)}),
        el("td", {class: c.violation === 0 ? "feasible-mark" : "infeasible-mark",
                  text: c.violation === 0 ? "✓ holds" : c.value === null ? "✗ never reported" : "✗ broken"}));
    }));
}

function trialView(id, trial) {
  const info = el("dl", {class: "kv", id: "trial-info"});
  const feasTitle = el("h2", {text: "Constraints", hidden: ""});
  const feasLine = el("p", {id: "feasibility", hidden: ""});
  const feasTable = el("table", {id: "constraints", hidden: ""});
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
    el("h2", {text: "Trial " + trial}), info, feasTitle, feasLine, feasTable,
    el("h2", {text: "Learning curve"}), noCurve, box,
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
    feasTitle.hidden = feasLine.hidden = feasTable.hidden = !t.constraints;
    if (t.constraints) feasibilityOf(t, feasLine, feasTable);
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
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const h = path.split("/");
  tabs.replaceChildren();
  if (h[0] !== "e" || h[1] === undefined) return experimentsView();
  const id = h[1], page = h[2] || "trials";
  switch (page) {
    case "trial": return trialView(id, h[3]);
    case "history": return chartView(id, page, "history.svg", null, query);
    case "curves": return chartView(id, page, "curves.svg", "The ten best trials and the latest running ones; open a trial for its own curve.", query);
    case "parallel": return parallelView(id, query);
    case "importance": return importanceView(id, query);
    case "plots": return plotsView(id, query);
    case "compare": return compareView(id, query);
    case "packing": return chartView(id, page, "packing.svg", "Each bar is one attempt on one device (a GPU, or a node's CPUs), from its placement to its end; under each GPU, the memory and compute given to the trials placed there.");
    case "nodes": return nodesView(id);
    case "front": return frontView(id);
    case "lineage": return lineageView(id);
    default: return trialsView(id, query);
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
