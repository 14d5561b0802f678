// warehouse ui: the page's only script (no inline scripts: the CSP forbids them).
// Routes: #/ overview · #/runs · #/run/ID · #/samples/ID · #/compare/ID,ID[,...]
"use strict";

const view = document.getElementById("view");
const statusLine = document.getElementById("status");
let timers = [];
let generation = 0; // bumped on every route change: stale fetches are dropped

// --- small helpers ------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

async function api(path) {
  const res = await fetch(path, { headers: { Accept: "application/json" } });
  let body;
  try { body = await res.json(); } catch (e) { body = { error: `${res.status} ${res.statusText}` }; }
  if (!res.ok) throw new Error(body.error || `${res.status} ${res.statusText}`);
  return body;
}

// A number as recorded: integers without separators (a seed of 3870 is "3870"), other numbers
// with 4 decimals or 3 significant digits, whichever shows more (lr 0.000538 stays 0.000538).
function num(v) {
  if (Number.isInteger(v)) return String(v);
  if (!Number.isFinite(v)) return String(v);
  const lead = v === 0 ? 0 : Math.max(0, -Math.floor(Math.log10(Math.abs(v))) - 1);
  return v.toFixed(Math.min(20, Math.max(4, lead + 3)));
}

// A config or parameter value exactly as stored (no rounding at all).
function raw(v) {
  return typeof v === "number" ? String(v) : fmt(v);
}

// A count of things (runs, samples, bytes): with thousands separators.
function count(v) {
  return typeof v === "number" ? v.toLocaleString() : fmt(v);
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return num(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "object") return JSON.stringify(v);
  const s = String(v);
  return /^\d{4}-\d\d-\d\dT/.test(s) ? s.slice(0, 19).replace("T", " ") : s;
}

const short = (id) => (id ? String(id).slice(0, 12) : "—");
const runLink = (id) => h("a", { href: `#/run/${encodeURIComponent(id)}`, text: short(id) });
const statusCell = (s) => h("span", { class: `status-${s}`, text: s || "—" });

function table(head, rows, numeric) {
  const num = new Set(numeric || []);
  return h("table", {},
    h("thead", {}, h("tr", {}, head.map((c, i) => h("th", { class: num.has(i) ? "num" : null, text: c })))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => h("td", { class: num.has(i) ? "num" : null }, c))))));
}

function every(ms, fn) { timers.push(setInterval(fn, ms)); }

// The page's content; null/false children (a section not shown) leave nothing behind, where
// replaceChildren would write them out as the text "null".
function show(...children) {
  view.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function failed(err) {
  show(h("div", { class: "error", id: "page-error", text: String(err.message || err) }));
  document.body.dataset.ready = "error";
}

async function embed(el, spec) {
  const result = await vegaEmbed(el, spec, {
    renderer: "svg", actions: false, ast: true, expr: vega.expressionInterpreter, defaultStyle: false,
    tooltip: { disableDefaultStyle: true },
  });
  el.dataset.rendered = "1";
  return result;
}

function output(href, kind, label) {
  if (!href) return h("div", { class: "muted", text: "no output" });
  if (kind === "image") {
    // an output whose file is gone says so, instead of a broken-image icon
    const missing = () => img.replaceWith(h("div", { class: "muted missing-output", text: "output missing" }));
    const img = h("img", { src: href, alt: label || "output", loading: "lazy", onerror: missing });
    return img;
  }
  if (kind === "audio") return h("audio", { src: href, controls: true });
  if (kind === "video") return h("video", { src: href, controls: true, width: 160 });
  if (kind === "text") {
    const pre = h("pre", { text: "…" });
    fetch(href).then((r) => r.text()).then((t) => { pre.textContent = t.slice(0, 2000); });
    return pre;
  }
  return h("a", { href, text: "download" });
}

// --- overview -----------------------------------------------------------------------------

async function overview(gen) {
  let shown = null;
  const refresh = async () => {
    const data = await api("/api/overview");
    if (gen !== generation) return;
    const stamp = JSON.stringify(data.fingerprint);
    statusLine.textContent = `${data.run_count.toLocaleString()} runs · refreshed ${new Date().toLocaleTimeString()}`;
    if (stamp === shown) return;
    shown = stamp;
    await renderOverview(data);
  };
  await refresh();
  every(5000, () => refresh().catch((e) => { statusLine.textContent = `refresh failed: ${e.message}`; }));
}

async function renderOverview(d) {
  const best = d.leaderboard[0];
  const better = d.direction === "max" ? "higher" : "lower";
  const charts = Object.keys(d.charts).map((name) => h("section", {}, h("div", { class: "chart", "data-view": name })));
  const ci = (r) => (r.ci_low === null || r.ci_low === undefined ? "—" : `[${fmt(r.ci_low)}, ${fmt(r.ci_high)}]`);
  const vsNext = (r) => (r.vs_next_diff === null || r.vs_next_diff === undefined ? "—"
    : `${r.vs_next_diff >= 0 ? "+" : ""}${fmt(r.vs_next_diff)} (p ${fmt(r.vs_next_p)})`);
  show(
    h("h1", { text: d.title }),
    h("p", { class: "muted", text: `${d.metric} (${better} is better) · ${d.source}` }),
    h("div", { class: "cards" },
      [["Runs", d.run_count.toLocaleString(), "run-count"], ["Experiments", d.experiment_count, null],
       [`Best ${d.metric}`, best ? fmt(best.best_score) : "—", null], ["Best experiment", best ? best.experiment : "—", null]]
        .map(([k, v, id]) => h("div", { class: "card" }, h("div", { class: "label", text: k }), h("div", { class: "value", id, text: v })))),
    best ? h("p", {}, "The best run: ", runLink(d.best_run_id), " · ",
      h("a", { href: `#/samples/${encodeURIComponent(d.best_run_id)}`, id: "best-samples", text: "its worst samples" })) : null,
    ...(charts.length ? charts : [h("section", { class: "muted", id: "overview-empty" },
      d.empty ? d.empty.message : `No run has a value of ${d.metric}`, d.left_out ? ` (${d.left_out})` : null)]),
    h("section", { id: "leaderboard" }, h("h2", { text: "Leaderboard" }),
      table(["#", "experiment", `best ${d.metric}`, "95% interval", "vs next", "best run", "runs", "ended"],
        d.leaderboard.map((r) => [r.rank, r.experiment, fmt(r.best_score), ci(r), vsNext(r), runLink(r.best_run_id), count(r.run_count), fmt(r.ended_at)]),
        [0, 2, 6])),
    h("section", { id: "decomposition" }, h("h2", { text: "Bias / variance of each experiment's best run" }),
      table(["experiment", "best run", "train error", "val error", "test error", "avoidable bias", "variance", "dev overfit"],
        d.decomposition.map((r) => [r.experiment, runLink(r.run_id), fmt(r.train_error), fmt(r.val_error), fmt(r.test_error),
          fmt(r.avoidable_bias), fmt(r.variance), fmt(r.dev_overfit)]), [2, 3, 4, 5, 6, 7])),
  );
  await Promise.all(charts.map((s) => embed(s.firstChild, d.charts[s.firstChild.dataset.view])));
  document.body.dataset.ready = "overview";
}

// --- runs ---------------------------------------------------------------------------------

async function runs(gen, params) {
  const meta = await api("/api/metrics");
  const state = {
    q: params.get("q") || "", sort: params.get("sort") || "started_at:desc",
    metrics: params.has("metrics") ? params.get("metrics").split(",").filter(Boolean)
      : meta.metrics.includes(meta.primary) ? [meta.primary] : meta.metrics.slice(0, 1),
    cursors: [null], page: 0, selected: new Set(),
  };
  const box = h("input", { type: "search", id: "filter", value: state.q, placeholder: "Lucene filter, e.g. experiment:digits-svm AND metrics.val.acc:>=0.9", spellcheck: "false" });
  const err = h("div", { class: "error", id: "filter-error" });
  const hints = h("div", { class: "hints", id: "filter-hints" });
  const info = h("span", { class: "muted", id: "runs-info" });
  const prev = h("button", { id: "prev", text: "‹ Previous" });
  const next = h("button", { id: "next", text: "Next ›" });
  const compareBtn = h("button", { id: "compare", text: "Compare selected", disabled: true });
  const picker = h("div", { class: "metric-picker" }, h("span", { class: "muted", text: "metric columns:" }),
    meta.metrics.map((m) => {
      const cb = h("input", { type: "checkbox", value: m, checked: state.metrics.includes(m) });
      cb.addEventListener("change", () => {
        state.metrics = [...picker.querySelectorAll("input:checked")].map((c) => c.value);
        load(true);
      });
      return h("label", {}, cb, ` ${m}`);
    }));
  const holder = h("div", { id: "runs-table" });
  show(h("h1", { text: "Runs" }),
    h("section", {}, h("div", { class: "toolbar" }, box, prev, next, compareBtn), err, hints, picker, info, holder));

  async function load(reset) {
    if (reset) { state.cursors = [null]; state.page = 0; }
    const qs = new URLSearchParams({ q: state.q, sort: state.sort, metrics: state.metrics.join(","), size: "50" });
    const cursor = state.cursors[state.page];
    if (cursor) qs.set("after", cursor);
    let data;
    try {
      data = await api(`/api/runs?${qs}`);
    } catch (e) {
      if (gen !== generation) return;
      err.textContent = e.message;
      holder.dataset.state = "error";
      document.body.dataset.ready = "runs";
      return;
    }
    if (gen !== generation) return;
    err.textContent = "";
    sayWhyEmpty(data.empty);
    state.cursors[state.page + 1] = data.next;
    render(data);
  }

  // what the CLI says under an empty answer: the filter's likely slips and the corrected filter
  function sayWhyEmpty(empty) {
    const lines = empty ? empty.hints.map((line) => h("div", { class: "hint", text: line })) : [];
    if (empty && empty.holds_no_run) lines.unshift(h("div", { class: "hint", text: empty.message }));
    if (empty && empty.corrected) {
      const fix = h("a", { href: "#", id: "filter-corrected", text: empty.corrected });
      fix.addEventListener("click", (e) => { e.preventDefault(); box.value = empty.corrected; state.q = empty.corrected; load(true); });
      lines.push(h("div", { class: "hint" }, "did you mean ", fix, "?"));
    }
    hints.replaceChildren(...lines);
  }

  function render(data) {
    const [sortField, sortOrder] = data.sort.split(":");
    const head = h("tr", {}, h("th", { text: "" }), data.columns.map((c) => {
      const sortable = c !== "tags";
      const th = h("th", { class: [sortable ? "sortable" : "", c === sortField ? `sorted-${sortOrder}` : "", c.startsWith("metrics.") || c === "duration_s" ? "num" : ""].join(" ").trim(), "data-col": c, text: c.replace(/^metrics\./, "") });
      if (sortable) th.addEventListener("click", () => {
        state.sort = `${c}:${c === sortField && sortOrder === "desc" ? "asc" : "desc"}`;
        load(true);
      });
      return th;
    }));
    const body = data.rows.map((r) => {
      const cb = h("input", { type: "checkbox", checked: state.selected.has(r.run_id) });
      cb.addEventListener("change", () => {
        if (cb.checked) state.selected.add(r.run_id); else state.selected.delete(r.run_id);
        compareBtn.disabled = state.selected.size < 2;
      });
      return h("tr", { "data-run": r.run_id }, h("td", {}, cb), data.columns.map((c) => {
        const v = r[c];
        if (c === "run_id") return h("td", {}, runLink(v));
        if (c === "status") return h("td", {}, statusCell(v));
        if (c === "tags") return h("td", { text: (v || []).join(", ") });
        return h("td", { class: c.startsWith("metrics.") || c === "duration_s" ? "num" : null, text: fmt(v) });
      }));
    });
    holder.replaceChildren(h("table", {}, h("thead", {}, head), h("tbody", {}, body)));
    holder.dataset.state = "ok";
    const first = state.page * 50;
    info.textContent = data.total ? `runs ${first + 1}–${first + data.rows.length} of ${data.total.toLocaleString()}` : (data.empty && data.empty.message) || "no run matches";
    prev.disabled = state.page === 0;
    next.disabled = !data.next;
    document.body.dataset.ready = "runs";
  }

  let debounce;
  box.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.q = box.value; load(true); }, 300);
  });
  prev.addEventListener("click", () => { if (state.page > 0) { state.page -= 1; load(false); } });
  next.addEventListener("click", () => { if (state.cursors[state.page + 1]) { state.page += 1; load(false); } });
  compareBtn.addEventListener("click", () => { location.hash = `#/compare/${[...state.selected].join(",")}`; });
  await load(true);
}

// --- one run ------------------------------------------------------------------------------

async function run(gen, id) {
  const d = await api(`/api/run?id=${encodeURIComponent(id)}`);
  if (gen !== generation) return;
  const r = d.run;
  const splits = Object.keys(r.metrics || {});
  const names = [...new Set(splits.flatMap((s) => Object.keys(r.metrics[s])))].sort();
  const ci = r.metrics_ci || {};
  const cell = (s, m) => {
    const v = (r.metrics[s] || {})[m];
    const c = (ci[s] || {})[m];
    return c && c.low !== undefined ? `${fmt(v)} [${fmt(c.low)}, ${fmt(c.high)}]` : fmt(v);
  };
  const git = r.git || {};
  const charts = h("div", { class: "grid2", id: "step-charts" });
  show(
    h("h1", { text: `Run ${r.run_id}` }),
    h("p", {}, statusCell(r.status), ` · ${r.experiment} · started ${fmt(r.started_at)} · ended ${fmt(r.ended_at)} · ${fmt(r.duration_s)} s`,
      r.sample_counts && Object.keys(r.sample_counts).length ? [" · ", h("a", { href: `#/samples/${encodeURIComponent(r.run_id)}`, text: "samples" })] : null),
    r.error ? h("div", { class: "error", text: `${r.error.type}: ${r.error.message}` }) : null,
    h("section", { id: "metrics" }, h("h2", { text: "Metrics per split" }),
      splits.length ? table(["split", ...names], splits.map((s) => [s, ...names.map((m) => cell(s, m))]), names.map((_, i) => i + 1))
        : h("p", { class: "muted", text: "No metrics recorded." })),
    h("section", { id: "steps" }, h("h2", { text: "Steps and system" }), charts),
    h("section", { id: "config" }, h("h2", { text: "Config (as stored, redacted)" }), h("pre", { text: d.config_yaml || "(empty)" })),
    h("section", { id: "git" }, h("h2", { text: "Code" }),
      table(["commit", "branch", "dirty", "message"], [[fmt(git.commit), fmt(git.branch), fmt(git.dirty), fmt(git.message)]]),
      d.git_diff ? h("pre", { id: "git-diff", text: d.git_diff }) : null),
    h("section", { id: "artifacts" }, h("h2", { text: "Artifacts" }),
      d.artifacts.length ? table(["name", "kind", "size", "type"], d.artifacts.map((a) => [h("a", { href: a.href, text: a.name }), a.kind, count(a.size_bytes), fmt(a.content_type)]), [2])
        : h("p", { class: "muted", text: "No artifacts." })),
    h("section", { id: "environment" }, h("h2", { text: "Environment" }), h("pre", { text: JSON.stringify(r.environment || {}, null, 2) })),
  );
  let rows = [];
  let last = -1;
  const draw = async () => {
    const s = await api(`/api/steps?id=${encodeURIComponent(r.run_id)}&after=${last}`);
    if (gen !== generation) return s.status;
    rows = rows.concat(s.rows);
    if (rows.length) last = rows[rows.length - 1].seq;
    const skip = new Set(["timestamp", "seq", "step", "epoch"]);
    const fields = [...new Set(rows.flatMap((x) => Object.keys(x)))].filter((f) => !skip.has(f) && rows.some((x) => typeof x[f] === "number"));
    if (!fields.length) { charts.replaceChildren(h("p", { class: "muted", text: "No steps recorded." })); return s.status; }
    const boxes = fields.slice(0, 16).map((f) => h("div", { class: "chart", "data-field": f }));
    charts.replaceChildren(...boxes);
    await Promise.all(boxes.map((b) => embed(b, {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json", title: b.dataset.field, width: "container", height: 160,
      data: { values: rows.map((x) => ({ step: x.step ?? x.seq, value: x[b.dataset.field] })) },
      mark: { type: "line", point: rows.length < 40 },
      encoding: { x: { field: "step", type: "quantitative" }, y: { field: "value", type: "quantitative", title: null, scale: { zero: false } } },
    })));
    return s.status;
  };
  const status = await draw();
  if (status === "running") every(3000, () => draw().catch(() => {}));
  document.body.dataset.ready = "run";
}

// --- samples gallery ----------------------------------------------------------------------

async function samples(gen, id, params) {
  const qs = new URLSearchParams();
  for (const k of ["split", "sort", "order", "offset"]) if (params.get(k)) qs.set(k, params.get(k));
  qs.set("id", id);
  const d = await api(`/api/samples?${qs}`);
  if (gen !== generation) return;
  const go = (changes) => {
    const p = new URLSearchParams({ split: d.split, sort: d.sort || "", order: d.order, offset: "0", ...changes });
    location.hash = `#/samples/${encodeURIComponent(d.run.run_id)}?${p}`;
  };
  const select = (id2, options, value, key) => {
    const s = h("select", { id: id2 }, options.map((o) => h("option", { value: o, selected: o === value, text: o })));
    s.addEventListener("change", () => go({ [key]: s.value }));
    return s;
  };
  const offset = d.offset || 0;
  const prev = h("button", { id: "prev", text: "‹ Previous", disabled: offset === 0 });
  const next = h("button", { id: "next", text: "Next ›", disabled: offset + d.rows.length >= (d.total || 0) });
  prev.addEventListener("click", () => go({ offset: String(Math.max(0, offset - 48)) }));
  next.addEventListener("click", () => go({ offset: String(offset + 48) }));
  const tiles = d.rows.map((s) => h("div", { class: "tile", "data-sample": s.sample_id },
    output(s.output, s.kind, `sample ${s.sample_id}`),
    h("div", { class: "id", text: s.sample_id }),
    Object.entries(s.values).map(([k, v]) => h("div", { class: k === d.sort ? "sorted" : null, text: `${k}: ${fmt(v)}` }))));
  show(
    h("h1", { text: "Samples" }),
    h("p", {}, "Run ", runLink(d.run.run_id), ` · ${d.run.experiment} · `, statusCell(d.run.status)),
    d.rows.length || d.columns.length ? h("section", {},
      h("div", { class: "toolbar" }, "split", select("split", Object.keys(d.splits), d.split, "split"),
        "sort by", select("sort", d.columns, d.sort, "sort"), select("order", ["asc", "desc"], d.order, "order"),
        prev, next, h("span", { class: "muted", text: `${offset + 1}–${offset + d.rows.length} of ${count(d.total)}` })),
      h("div", { class: "gallery", id: "gallery" }, tiles))
      : h("section", { class: "muted", text: "This run has no per-sample results." }),
  );
  document.body.dataset.ready = "samples";
}

// --- compare ------------------------------------------------------------------------------

async function compare(gen, ids) {
  const d = await api(`/api/compare?ids=${encodeURIComponent(ids)}`);
  if (gen !== generation) return;
  const rows = d.rows.map((r) => {
    const values = d.runs.map((id) => r[id]);
    const differs = values.some((v) => JSON.stringify(v) !== JSON.stringify(values[0]));
    return h("tr", { class: differs ? "differs" : null, "data-field": r.field },
      h("td", { text: r.field }), values.map((v) => h("td", { text: r.field.startsWith("config.") ? raw(v) : fmt(v) })));
  });
  const config = d.rows.filter((r) => r.field.startsWith("config."));
  let diff = null;
  if (d.diff && d.diff.error) diff = h("p", { class: "muted", text: `No per-sample diff: ${d.diff.error}` });
  else if (d.diff) {
    diff = [h("p", { id: "diff-summary", text: d.diff.summary }),
      h("div", { class: "gallery", id: "flipped" }, d.diff.rows.map((r) => h("div", { class: "tile", "data-sample": r.sample_id },
        h("div", { class: "pair" }, h("div", {}, output(r.a_output, r.kind, "a"), "a: ", fmt(r.a)), h("div", {}, output(r.b_output, r.kind, "b"), "b: ", fmt(r.b))),
        h("div", { class: "id", text: r.sample_id }), h("div", { class: r.change, text: r.change }))))];
  }
  show(
    h("h1", { text: `Compare ${d.runs.length} runs` }),
    h("section", { id: "config-diff" }, h("h2", { text: `Config keys that differ (${config.length})` }),
      config.length ? null : h("p", { class: "muted", text: "The configs are the same." }),
      h("table", {}, h("thead", {}, h("tr", {}, h("th", { text: "field" }), d.runs.map((id) => h("th", {}, runLink(id))))),
        h("tbody", {}, rows))),
    h("section", { id: "flips" }, h("h2", { text: d.diff && d.diff.split ? `Samples that flipped (${d.diff.split}, ${d.diff.column}): a = ${short(d.runs[0])}, b = ${short(d.runs[1])}` : "Samples that flipped" }), diff),
  );
  document.body.dataset.ready = "compare";
}

// --- routing ------------------------------------------------------------------------------

async function route() {
  timers.forEach(clearInterval);
  timers = [];
  generation += 1;
  const gen = generation;
  delete document.body.dataset.ready;
  const [path, query] = (location.hash.replace(/^#/, "") || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === (parts[0] || "overview")));
  try {
    if (!parts.length) await overview(gen);
    else if (parts[0] === "runs") await runs(gen, params);
    else if (parts[0] === "run" && parts[1]) await run(gen, parts[1]);
    else if (parts[0] === "samples" && parts[1]) await samples(gen, parts[1], params);
    else if (parts[0] === "compare" && parts[1]) await compare(gen, parts[1]);
    else failed(new Error(`no page ${location.hash}`));
  } catch (e) {
    if (gen === generation) failed(e);
  }
}

window.addEventListener("hashchange", route);
route();
