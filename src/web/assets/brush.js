// tunepack dashboard: the brushed set, and the parallel coordinates that brush it.
// Loaded before app.js, whose helpers (el, getJSON, getText, fmt, count, experimentFrame) it
// uses once the page runs.
//
// A brush is a filter of the trials table's own kinds, kept in the page's URL after the hash:
// min.COLUMN / max.COLUMN (a number's range, the table's range filters) and in.p:NAME, once per
// value kept (a choice's). The pages that draw trials (the table, history, learning curves,
// parallel coordinates, importance, slice and contour) carry it from tab to tab and send it to
// the server with each request; the server filters in SQL, so no page needs every trial.
"use strict";

const BRUSHED_PAGES = ["trials", "history", "curves", "parallel", "importance", "plots"];
const isBrushKey = k => k.startsWith("min.") || k.startsWith("max.") || k.startsWith("in.");

// The brush keys of a query (a string or URLSearchParams), as URLSearchParams.
function brushOf(query) {
  const out = new URLSearchParams();
  for (const [k, val] of new URLSearchParams(query || "")) if (isBrushKey(k)) out.append(k, val);
  return out;
}
// The brush of the page shown now (its URL may change without a hashchange: replaceState).
function brushNow() { return brushOf(location.hash.split("?")[1] || ""); }
// An API path with the brush of v added to its arguments.
function withBrush(path, v) {
  const b = String(brushOf(v));
  return b ? path + (path.includes("?") ? "&" : "?") + b : path;
}
// A query without its brush keys.
function withoutBrush(v) {
  const w = new URLSearchParams(v);
  for (const k of [...w.keys()]) if (isBrushKey(k)) w.delete(k);
  return w;
}

// The brush in words: "0.1 ≤ x ≤ 0.5; opt is adam or sgd".
function brushWords(v) {
  const b = brushOf(v), cols = new Map();
  for (const [k, val] of b) {
    const [kind, ...rest] = k.split(".");
    const col = rest.join(".");
    if (!cols.has(col)) cols.set(col, {in: []});
    const c = cols.get(col);
    if (kind === "in") c.in.push(val); else c[kind] = val;
  }
  const label = col => col.startsWith("p:") || col.startsWith("m:") ? col.slice(2) : col;
  return [...cols].map(([col, c]) => {
    const name = label(col), parts = [];
    if (c.min !== undefined && c.max !== undefined) parts.push(c.min + " ≤ " + name + " ≤ " + c.max);
    else if (c.min !== undefined) parts.push(name + " ≥ " + c.min);
    else if (c.max !== undefined) parts.push(name + " ≤ " + c.max);
    if (c.in.length) parts.push(name + " is " + c.in.join(" or "));
    return parts.join(", ");
  }).join("; ");
}

// A line that says which brush a page's trials are filtered by, with a link that clears it
// (filled again by each refresh of the page: the table's ranges change in place).
function brushNote() { return el("p", {id: "brush-note", class: "brush-note", hidden: ""}); }
function showBrush(p, id, page, v) {
  const words = brushWords(v);
  p.hidden = !words;
  if (!words) { p.replaceChildren(); return; }
  const rest = String(withoutBrush(v));
  p.replaceChildren("Only the brushed set: " + words + " · ",
    el("a", {id: "clear-brush", href: "#/e/" + id + "/" + page + (rest ? "?" + rest : ""),
             text: "clear the brush"}));
}

// Parallel coordinates (drawn by the server) brushed on the page. Drag along an axis to brush
// it: a number's axis keeps a range, a choice's axis the values the brush covers. Drag a brush
// to move it; click an axis to clear its brush. Brushes on several axes keep the lines within
// all. Our own script rather than a library: the SVG is the server's, so a brush needs only each
// axis's range (data-lo, data-hi, data-log), a choice's labels (data-cats) and each line's
// scaled values (data-v); see docs/dashboard.md.
function parallelView(id, query) {
  const v = new URLSearchParams(query || "");
  const box = el("div", {class: "chart", id: "chart"});
  const note = el("span", {id: "brushed"});
  const clearAll = el("button", {id: "clear-brushes", text: "clear every brush", onclick: () => {
    for (const k of [...v.keys()]) if (isBrushKey(k)) v.delete(k);
    saved();
  }});
  const frame = experimentFrame(id, "parallel", el("div", {},
    el("p", {class: "muted", text: "Drag along an axis to brush it (a number's range, or a " +
      "choice's values); drag a brush to move it; click an axis to clear its brush."}),
    el("div", {class: "controls"}, clearAll, note), box));
  let drawn = "", counted = null, asked = 0;
  // value <-> [0, 1] along a number's axis, as the server scaled it
  const scale = (r, x) => r.log ? Math.log(x / r.lo) / Math.log(r.hi / r.lo) : (x - r.lo) / (r.hi - r.lo || 1);
  const unscale = (r, u) => r.log ? r.lo * Math.pow(r.hi / r.lo, u) : r.lo + u * (r.hi - r.lo);
  const clamp = u => Math.min(1, Math.max(0, u));
  const axes = () => [...box.querySelectorAll("rect.brush-axis")].map(a => ({el: a, key: a.dataset.key,
    axis: +a.dataset.axis, lo: +a.dataset.lo, hi: +a.dataset.hi, log: a.dataset.log === "1",
    cats: a.dataset.cats ? JSON.parse(a.dataset.cats) : null}));
  // A choice's k-th value along its axis, and half the step between two.
  const catAt = (r, k) => r.cats.length > 1 ? k / (r.cats.length - 1) : 0.5;
  const half = r => r.cats.length > 1 ? 0.5 / (r.cats.length - 1) : 0.5;
  // An axis's brush from the URL: null, {a, b} along a number's axis, or {set} of a choice's
  // value indices.
  function brushOn(r) {
    if (r.cats) {
      const names = v.getAll("in." + r.key);
      return names.length ? {set: new Set(names.map(n => r.cats.indexOf(n)).filter(k => k >= 0))} : null;
    }
    const lo = v.get("min." + r.key), hi = v.get("max." + r.key);
    if (lo === null && hi === null) return null;
    return {a: lo === null ? 0 : scale(r, +lo), b: hi === null ? 1 : scale(r, +hi)};
  }
  // Where a brush lies along its axis: [a, b] pieces (a choice's: a piece per run of values).
  function extents(r, br) {
    if (!br.set) return [[clamp(br.a), clamp(br.b)]];
    const ks = [...br.set].sort((x, y) => x - y), out = [];
    for (const k of ks) {
      const last = out[out.length - 1];
      if (last && last.k === k - 1) { last.b = clamp(catAt(r, k) + half(r)); last.k = k; }
      else out.push({a: clamp(catAt(r, k) - half(r)), b: clamp(catAt(r, k) + half(r)), k});
    }
    return out.map(p => [p.a, p.b]);
  }
  // Whether a line's value on the axis (scaled, NaN when absent) is within the brush.
  function within(r, br, u) {
    if (!isFinite(u)) return false;
    if (br.set) return br.set.has(r.cats.length > 1 ? Math.round(u * (r.cats.length - 1)) : 0);
    return u >= br.a - 1e-4 && u <= br.b + 1e-4;
  }
  // The brush a drag from a to b draws (null: too short, or no choice's value under it).
  function drawnBrush(r, a, b) {
    if (!r.cats) return b - a > 0.005 ? {a, b} : null;
    const set = new Set(r.cats.map((_, k) => k).filter(k => catAt(r, k) >= a && catAt(r, k) <= b));
    return set.size ? {set} : null;
  }
  // A brush moved by du along its axis, kept whole inside it.
  function movedBrush(r, br, du) {
    if (!br.set) {
      const a = clamp(br.a), w = clamp(br.b) - a, to = Math.min(1 - w, Math.max(0, a + du));
      return {a: to, b: to + w};
    }
    const ks = [...br.set], n = r.cats.length;
    let d = n > 1 ? Math.round(du * (n - 1)) : 0;
    d = Math.min(n - 1 - Math.max(...ks), Math.max(-Math.min(...ks), d));
    return {set: new Set(ks.map(k => k + d))};
  }
  function apply() {
    const svg = box.querySelector("svg");
    if (!svg) return;
    svg.querySelectorAll("rect.brush").forEach(b => b.remove());
    const active = [];
    for (const r of axes()) {
      const br = brushOn(r);
      if (!br) continue;
      active.push([r, br]);
      const y0 = +r.el.getAttribute("y"), h = +r.el.getAttribute("height");
      for (const [a, b] of extents(r, br)) {
        const mark = document.createElementNS("http://www.w3.org/2000/svg", "rect");
        for (const [k, val] of Object.entries({class: "brush", "data-key": r.key,
          x: +r.el.getAttribute("x") + 3, width: 10, y: y0 + h * (1 - b), height: Math.max(1, h * (b - a)),
          fill: "#3366cc", "fill-opacity": 0.3, stroke: "#3366cc", "pointer-events": "none"}))
          mark.setAttribute(k, val);
        svg.appendChild(mark);
      }
    }
    let kept = 0, all = 0;
    for (const line of svg.querySelectorAll("polyline[data-v]")) {
      const vals = line.dataset.v.split(" ").map(Number);
      const ok = active.every(([r, br]) => within(r, br, vals[r.axis]));
      line.setAttribute("stroke-opacity", ok ? 0.55 : 0.04);
      line.classList.toggle("out", !ok);
      all++;
      kept += ok;
    }
    const b = brushOf(v), link = (page, idName, text) =>
      el("a", {id: idName, href: "#/e/" + id + "/" + page + "?" + b, text});
    clearAll.hidden = !String(b);
    note.replaceChildren(...(String(b) ? [kept + " of " + all + " lines in the brushed set" +
      (counted !== null && counted.key === String(b) ? " (" + count(counted.matched, "trial") + " in the table)" : "") + " · ",
      link("trials", "brushed-trials", "these trials in the table"), " · ",
      link("importance", "brushed-importance", "their importance"), " · ",
      link("history", "brushed-history", "history"), " · ",
      link("curves", "brushed-curves", "learning curves"), " · ",
      link("plots", "brushed-plots", "their slice and contour")] : []));
    note.dataset.kept = kept;
  }
  // The brushed set as the server counts it (every trial the table would show).
  async function countBrushed() {
    const b = String(brushOf(v)), mine = ++asked;
    if (!b) { counted = null; return; }
    const page = await getJSON("/api/e/" + id + "/trials?limit=1&" + b);
    if (mine === asked) { counted = {key: b, matched: page.matched}; apply(); }
  }
  // The brush changed: into the URL (no new history entry, no hashchange), then drawn.
  function saved(settled = true) {
    history.replaceState(null, "", "#/e/" + id + "/parallel" + (String(v) ? "?" + v : ""));
    apply();
    if (settled) countBrushed().catch(() => {});
  }
  function setBrush(r, br, settled) {
    for (const side of ["min.", "max.", "in."]) v.delete(side + r.key);
    if (br && br.set) {
      for (const k of [...br.set].sort((x, y) => x - y)) v.append("in." + r.key, r.cats[k]);
    } else if (br) {
      v.set("min." + r.key, +unscale(r, br.a).toPrecision(6));
      v.set("max." + r.key, +unscale(r, br.b).toPrecision(6));
    }
    saved(settled);
  }
  box.addEventListener("mousedown", e => {
    const target = e.target.closest && e.target.closest("rect.brush-axis");
    if (!target || e.button !== 0) return;
    e.preventDefault();
    const r = axes().find(x => x.el === target), rect = target.getBoundingClientRect();
    const u = y => clamp(1 - (y - rect.top) / rect.height);
    const start = u(e.clientY), y0 = e.clientY, was = brushOn(r);
    // Pressed on the brush: it moves; elsewhere on the axis: a new one is drawn.
    const onBrush = was && extents(r, was).some(([a, b]) => start >= a - 0.01 && start <= b + 0.01);
    let dragged = false;
    const move = (m, settled) => {
      if (!dragged && Math.abs(m.clientY - y0) < 3) return;
      dragged = true;
      const now = u(m.clientY);
      setBrush(r, onBrush ? movedBrush(r, was, now - start)
                          : drawnBrush(r, Math.min(start, now), Math.max(start, now)), settled);
    };
    const drag = m => move(m, false);
    const up = m => {
      document.removeEventListener("mousemove", drag);
      document.removeEventListener("mouseup", up);
      move(m, true);
      if (!dragged) setBrush(r, null, true);  // a click clears the axis's brush
    };
    document.addEventListener("mousemove", drag);
    document.addEventListener("mouseup", up);
  });
  countBrushed().catch(() => {});
  return async () => {
    const [svg] = await Promise.all([getText("/api/e/" + id + "/parcoords.svg"), frame()]);
    if (svg !== drawn) { box.innerHTML = svg; drawn = svg; }
    apply();
  };
}
