// The instance browser and instance pages of report.html. Vanilla JS, no network: the data
// sit in <script type="application/octet-stream" id="chunk-NAME"> elements (gzip, base64)
// and are inflated with DecompressionStream the first time a view needs them.
(function () {
  "use strict";
  const cache = {};
  const PAGE = 100;
  let IDX = null;
  let hay = null;            // lower-cased search text per instance
  let rowsOf = null;         // instance index -> its rows (one per run)
  let filtered = [];
  let built = false;
  const state = { q: "", type: "", model: "", setting: "", scorer: 0, f1min: "", f1max: "",
                  jmin: "", jmax: "", failed: "", sort: "f1", dir: 1, page: 0 };

  // ---------------------------------------------------------------- helpers
  function chunk(name) {
    if (!cache[name]) {
      cache[name] = (async () => {
        const node = document.getElementById("chunk-" + name);
        if (!node) throw new Error("no data chunk " + name);
        const bin = atob(node.textContent.trim());
        const bytes = new Uint8Array(bin.length);
        for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
        if (typeof DecompressionStream === "undefined") throw new Error("this browser lacks DecompressionStream; open the report in a current Chrome, Firefox or Safari");
        const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        return JSON.parse(await new Response(stream).text());
      })();
    }
    return cache[name];
  }
  function el(tag, props, ...kids) {
    const node = document.createElement(tag);
    if (props) for (const [k, v] of Object.entries(props)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  const pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1));
  const num = (v, d) => (v === null || v === undefined ? "—" : (+v).toFixed(d));
  const cost = (v) => (v === null || v === undefined ? "—" : "$" + (+v).toFixed(v < 0.01 ? 5 : 3));
  function labelClass(label) {
    const s = String(label || "").toLowerCase();
    if (s.includes("not")) return "badge lab-not";
    if (s.includes("partial")) return "badge lab-partial";
    if (s.includes("fully") || s.includes("covered")) return "badge lab-full";
    return "badge";
  }
  function setStatus(text) { document.getElementById("status").textContent = text; }
  function fail(where, err) {
    console.error(err);
    where.replaceChildren(el("p", { class: "warning", text: "Could not show this view: " + (err && err.message || err) }));
  }
  function runLabel(r) { const run = IDX.runs[r]; return run.label + (run.setting === "default" ? "" : " · " + run.setting); }
  function show(view) {
    for (const v of document.querySelectorAll("main > .view")) v.hidden = v.id !== "view-" + view;
    for (const a of document.querySelectorAll("header.top nav a"))
      a.classList.toggle("active", a.dataset.view === view || (view === "instance" && a.dataset.view === "instances"));
  }

  // ---------------------------------------------------------------- index
  async function loadIndex() {
    if (IDX) return IDX;
    const idx = await chunk("index");
    hay = idx.instances.map((x) => [x.id, x.persona, x.type, x.request, x.factor, x.preference]
      .filter(Boolean).join(" ").toLowerCase());
    rowsOf = idx.instances.map(() => []);
    idx.rows.inst.forEach((inst, row) => rowsOf[inst].push(row));
    const p = idx.primary;
    state.scorer = p.inference !== null ? p.inference : (p.generation !== null ? p.generation : 0);
    if (p.inference === null) state.sort = "j";
    IDX = idx;
    return idx;
  }
  const metric = (key, row, k) => { const m = IDX.metrics[k === undefined ? state.scorer : k]; return m ? m[key][row] : null; };

  // ---------------------------------------------------------------- browser
  function applyFilters() {
    const R = IDX.rows, terms = state.q.toLowerCase().split(/\s+/).filter(Boolean);
    const lim = (s, scale) => (s === "" || isNaN(+s) ? null : +s / scale);
    const f1min = lim(state.f1min, 100), f1max = lim(state.f1max, 100), jmin = lim(state.jmin, 1), jmax = lim(state.jmax, 1);
    const out = [];
    for (let row = 0; row < R.inst.length; row++) {
      const inst = IDX.instances[R.inst[row]], run = IDX.runs[R.run[row]];
      if (state.type && inst.type !== state.type) continue;
      if (state.model && run.model !== state.model) continue;
      if (state.setting && run.setting !== state.setting) continue;
      const fails = R.fail[row] || [];
      if (state.failed === "any" && !fails.length) continue;
      if (state.failed === "none" && fails.length) continue;
      if (state.failed && state.failed !== "any" && state.failed !== "none" && !fails.includes(state.failed)) continue;
      const f1 = metric("f1", row), j = metric("j", row);
      if ((f1min !== null || f1max !== null) && (f1 === null || (f1min !== null && f1 < f1min - 1e-9) || (f1max !== null && f1 > f1max + 1e-9))) continue;
      if ((jmin !== null || jmax !== null) && (j === null || (jmin !== null && j < jmin) || (jmax !== null && j > jmax))) continue;
      if (terms.length) {
        const text = hay[R.inst[row]] + " " + run.model.toLowerCase() + " " + run.label.toLowerCase();
        if (!terms.every((t) => text.includes(t))) continue;
      }
      out.push(row);
    }
    const key = sortKey(state.sort), dir = state.dir;
    out.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === null && y === null) return a - b;
      if (x === null) return 1;
      if (y === null) return -1;
      if (x < y) return -dir;
      if (x > y) return dir;
      return a - b;
    });
    filtered = out;
  }
  function sortKey(name) {
    const R = IDX.rows;
    switch (name) {
      case "id": return (r) => IDX.instances[R.inst[r]].id;
      case "type": return (r) => IDX.instances[R.inst[r]].type;
      case "model": return (r) => IDX.runs[R.run[r]].label;
      case "setting": return (r) => IDX.runs[R.run[r]].setting;
      case "tok": return (r) => R.tok[r];
      case "cost": return (r) => R.cost[r];
      case "fail": return (r) => (R.fail[r] ? R.fail[r].length : 0);
      default: return (r) => metric(name, r);
    }
  }
  const COLUMNS = [["id", "Instance"], ["type", "Type"], ["model", "Model"], ["setting", "Setting"],
    ["p", "P", "num"], ["r", "R", "num"], ["f1", "F1", "num"], ["j", "Judge", "num"],
    ["fail", "Failed steps"], ["tok", "Tokens", "num"], ["cost", "Cost", "num"], ["req", "Request"]];

  function buildBrowser() {
    const view = document.getElementById("view-instances");
    const uniq = (xs) => [...new Set(xs)];
    const opts = (values, all, names) => [el("option", { value: "", text: all }),
      ...values.map((v, k) => el("option", { value: v, text: names ? names[k] : v }))];
    const models = uniq(IDX.runs.map((r) => r.model));
    const steps = uniq(IDX.rows.fail.flatMap((f) => f || [])).sort();
    const bind = (node, key) => {
      node.value = state[key];
      node.addEventListener(node.tagName === "SELECT" ? "change" : "input", () => {
        state[key] = key === "scorer" ? +node.value : node.value; state.page = 0; renderTable();
      });
      return node;
    };
    const controls = el("div", { class: "controls" },
      el("label", null, "Search", bind(el("input", { type: "search", id: "f-q", placeholder: "id, request, preference, model" }), "q")),
      el("label", null, "Type", bind(el("select", { id: "f-type" }, opts(uniq(IDX.instances.map((x) => x.type)), "all types")), "type")),
      el("label", null, "Model", bind(el("select", { id: "f-model" }, opts(models, "all models",
        models.map((m) => IDX.runs.find((r) => r.model === m).label))), "model")),
      el("label", null, "Setting", bind(el("select", { id: "f-setting" }, opts(uniq(IDX.runs.map((r) => r.setting)), "all settings")), "setting")),
      el("label", null, "Scorer", bind(el("select", { id: "f-scorer" },
        IDX.scorers.map((s, k) => el("option", { value: k, text: s }))), "scorer")),
      el("label", null, "F1 % from", bind(el("input", { type: "number", id: "f-f1min", min: 0, max: 100, step: "any" }), "f1min")),
      el("label", null, "to", bind(el("input", { type: "number", id: "f-f1max", min: 0, max: 100, step: "any" }), "f1max")),
      el("label", null, "Judge from", bind(el("input", { type: "number", id: "f-jmin", min: 1, max: 10, step: "any" }), "jmin")),
      el("label", null, "to", bind(el("input", { type: "number", id: "f-jmax", min: 1, max: 10, step: "any" }), "jmax")),
      el("label", null, "Failed steps", bind(el("select", { id: "f-failed" }, el("option", { value: "", text: "any outcome" }),
        el("option", { value: "any", text: "with a failed step" }), el("option", { value: "none", text: "without failed steps" }),
        steps.map((s) => el("option", { value: s, text: "failed at " + s }))), "failed")),
      el("button", { id: "f-reset", onclick: () => { Object.assign(state, { q: "", type: "", model: "", setting: "", f1min: "", f1max: "", jmin: "", jmax: "", failed: "", page: 0 }); built = false; buildBrowser(); } }, "Reset"));
    const head = el("tr", null, COLUMNS.map(([key, title, cls]) => el("th", {
      class: cls, "data-key": key, onclick: key === "req" ? null : () => {
        state.dir = state.sort === key ? -state.dir : 1; state.sort = key; state.page = 0; renderTable(); } }, title)));
    view.replaceChildren(el("h1", null, "Instances ", el("span", { class: "muted", id: "count" })),
      el("p", { class: "muted" }, "One row per model, setting and instance; metrics under the chosen scorer. Sorted worst first by default; click a header to sort, a row to open it."),
      controls, el("div", { class: "table-wrap" }, el("table", { class: "grid", id: "instances-table" }, el("thead", null, head), el("tbody"))),
      el("div", { class: "pager", id: "pager" }));
    built = true;
    renderTable();
  }

  function renderTable() {
    applyFilters();
    const R = IDX.rows, k = state.scorer;
    const pages = Math.max(1, Math.ceil(filtered.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE;
    const body = document.querySelector("#instances-table tbody");
    body.replaceChildren(...filtered.slice(start, start + PAGE).map((row) => {
      const inst = IDX.instances[R.inst[row]], fails = R.fail[row] || [];
      return el("tr", { "data-row": row, onclick: () => { location.hash = "i=" + row + "&s=" + k; } },
        el("td", null, el("a", { href: "#i=" + row + "&s=" + k }, inst.id)), el("td", { text: inst.type }),
        el("td", { text: IDX.runs[R.run[row]].label }), el("td", { text: IDX.runs[R.run[row]].setting }),
        el("td", { class: "num", text: pct(metric("p", row)) }), el("td", { class: "num", text: pct(metric("r", row)) }),
        el("td", { class: "num", text: pct(metric("f1", row)) }), el("td", { class: "num", text: num(metric("j", row), 0) }),
        el("td", { class: fails.length ? "fail" : "", text: fails.join(", ") }),
        el("td", { class: "num", text: R.tok[row] ? R.tok[row].toLocaleString("en-US") : "—" }),
        el("td", { class: "num", text: cost(R.cost[row]) }), el("td", { class: "req", title: inst.request || "", text: inst.request || "" }));
    }));
    for (const th of document.querySelectorAll("#instances-table th")) {
      th.classList.toggle("sorted-asc", th.dataset.key === state.sort && state.dir === 1);
      th.classList.toggle("sorted-desc", th.dataset.key === state.sort && state.dir === -1);
    }
    document.getElementById("count").textContent = filtered.length + " of " + R.inst.length + " rows";
    const pager = document.getElementById("pager");
    const go = (p) => () => { state.page = p; renderTable(); };
    pager.replaceChildren(el("button", { disabled: state.page === 0, onclick: go(state.page - 1) }, "‹ Prev"),
      el("span", { text: "page " + (state.page + 1) + " of " + pages }),
      el("button", { disabled: state.page >= pages - 1, onclick: go(state.page + 1) }, "Next ›"));
  }

  // ---------------------------------------------------------------- instance page
  function sessionsBox(inst, sessions, setting) {
    if (!inst.sessions) {
      return el("div", { class: "box", id: "sessions" }, el("h2", null, "Prior sessions"),
        el("p", { class: "note" }, "The instance data were not found, so the sessions cannot be shown (relevant positions: " +
          ((inst.relevant || []).join(", ") || "none") + "). Pass --data_dir to the report."));
    }
    const items = inst.sessions.map((sid, k) => {
      const [factor, pref, turns] = sessions[sid];
      const sameFactor = factor.trim() === (inst.factor || "").trim();
      const samePref = pref.trim() === (inst.preference || "").trim();
      const relevant = sameFactor && samePref;
      const badges = [];
      if (relevant) badges.push(el("span", { class: "badge relevant" }, "relevant: same factor and preference"));
      else if (sameFactor) badges.push(el("span", { class: "badge changed" }, "same factor, other preference"));
      else if (samePref) badges.push(el("span", { class: "badge changed" }, "same preference, other factor"));
      const d = el("details", { class: "session" + (relevant ? " relevant" : ""), "data-relevant": relevant ? "1" : "0" },
        el("summary", null, el("b", null, "Session " + (k + 1)), " · ", factor, " ", badges,
          el("span", { class: "muted" }, " · " + turns.length + " turns")),
        el("div", { class: "turns" }, el("p", null, el("b", null, "Preference: "), pref),
          turns.map(([role, text]) => el("div", { class: "turn" }, el("div", { class: "who" }, role === 0 ? "User" : "AI Assistant"),
            el("div", { class: "text" }, text)))));
      return d;
    });
    const n = items.filter((d) => d.dataset.relevant === "1").length;
    return el("div", { class: "box", id: "sessions" }, el("h2", null, "Prior sessions (" + items.length + ") ",
      el("span", { class: "muted" }, n + " relevant (same factor and preference as the current request)" +
        (setting === "oracle" ? "; in the oracle setting the model saw only the sessions holding the current preference" : ""))),
      el("button", { onclick: (e) => { const open = e.target.textContent.startsWith("Expand"); for (const d of items) d.open = open; e.target.textContent = open ? "Collapse all" : "Expand all"; } }, "Expand all"),
      items);
  }

  function checklistTable(entries, results, caption) {
    const byIndex = {};
    for (const r of results || []) if (r && r.index !== undefined) byIndex[r.index] = r;
    const list = entries && entries.length ? entries : (results || []).map((r) => r.entry);
    if (!list.length) return el("p", { class: "note" }, "No checklist.");
    return el("table", { class: "check" }, el("caption", { class: "muted", style: "text-align:left" }, caption),
      list.map((entry, i) => {
        const r = byIndex[i + 1] || (results || []).find((x) => x && x.entry === entry);
        return el("tr", null, el("td", { class: "lab" }, r ? el("span", { class: labelClass(r.label), title: r.score !== undefined ? "score " + r.score : "" }, r.label) : el("span", { class: "muted" }, "—")),
          el("td", null, entry));
      }));
  }

  function stepRows(name, step, scope) {
    const u = step.usage || {};
    const failed = step.status !== "done";
    const rows = [el("tr", { class: failed ? "fail" : "" }, el("td", null, name, scope ? el("span", { class: "muted" }, " (" + scope + ")") : null),
      el("td", null, step.status), el("td", null, step.model || ""), el("td", null, step.attempts || ""),
      el("td", null, (u.prompt_tokens || 0) + " + " + (u.completion_tokens || 0)), el("td", null, cost(step.cost)),
      el("td", null, step.error || ""))];
    if (step.raw && step.raw.length) {
      const raw = el("details", { open: failed, class: "raw" }, el("summary", null, (failed ? "Raw answers of the failed attempts (" : "Raw answers (") + step.raw.length + ")"),
        step.raw.map((text, k) => el("div", null, el("div", { class: "muted" }, "attempt " + (k + 1)), el("pre", null, text === null ? "(no answer)" : String(text)))),
        step.request ? el("details", null, el("summary", null, "Request sent"), el("pre", null, JSON.stringify(step.request, null, 2))) : null);
      rows.push(el("tr", null, el("td", { colspan: 7 }, raw)));
    }
    return rows;
  }

  function panel(row, k, det, inst) {
    const R = IDX.rows, scorer = IDX.scorers[k];
    const ev = (det.evaluations || {})[scorer] || { steps: {} };
    const steps = det.steps || {}, es = ev.steps || {};
    const out = (s) => (s && s.status === "done" ? s.output || {} : null);
    const inf = ev.inference || {}, gen = ev.generation || {};
    const failedNote = (s, what) => (s && s.status !== "done" ? el("p", { class: "fail" }, what + " failed: " + (s.error || "no reason recorded")) : null);
    const all = [...Object.entries(steps).map(([n, s]) => [n, s, ""]), ...Object.entries(es).map(([n, s]) => [n, s, "scorer"])];
    const tokens = all.reduce((t, [, s]) => t + ((s.usage || {}).prompt_tokens || 0) + ((s.usage || {}).completion_tokens || 0), 0);
    const costs = all.map(([, s]) => s.cost).filter((c) => c !== undefined && c !== null);
    const infer = out(steps.infer), gener = out(steps.generate), judge = out(es.judge), dec = out(es.decompose);
    const summarize = out(steps.summarize);
    return el("div", { class: "panel", "data-row": row, "data-scorer": k },
      el("h2", null, runLabel(R.run[row]), el("span", { class: "muted" }, " · scorer " + scorer)),
      el("div", { class: "metrics" }, el("div", null, "P ", el("b", null, pct(inf.precision))), el("div", null, "R ", el("b", null, pct(inf.recall))),
        el("div", null, "F1 ", el("b", { class: "f1" }, pct(inf.f1))), el("div", null, "Judge ", el("b", { class: "judge" }, gen.score === undefined || gen.score === null ? "—" : gen.score)),
        el("div", null, "Tokens ", el("b", null, tokens.toLocaleString("en-US"))), el("div", null, "Cost ", el("b", null, costs.length ? cost(costs.reduce((a, b) => a + b, 0)) : "—"))),
      summarize ? el("div", { class: "box" }, el("h3", null, "Session summaries (summary setting)"), el("pre", null, JSON.stringify(summarize.summaries || summarize, null, 2))) : null,
      el("div", { class: "box sec-inferred" }, el("h3", null, "Inferred preference"),
        infer ? [el("div", { class: "text" }, infer.preference || ""), infer.analysis ? el("details", null, el("summary", null, "The model's analysis"), el("div", { class: "text" }, infer.analysis)) : null]
          : (failedNote(steps.infer, "Inference") || el("p", { class: "note" }, steps.infer ? "Not done yet." : "Not part of this run's task or setting."))),
      el("div", { class: "box sec-recall" }, el("h3", null, "Ground-truth checklist ", el("span", { class: "muted" }, "does the inferred preference cover each entry? (recall)")),
        failedNote(es.match_recall, "Matching"), checklistTable(inst.checklist, (out(es.match_recall) || {}).results, "")),
      el("div", { class: "box sec-precision" }, el("h3", null, "Inferred checklist ", el("span", { class: "muted" }, "does the ground truth cover each entry? (precision)")),
        failedNote(es.decompose, "Decomposition"), failedNote(es.match_precision, "Matching"),
        checklistTable(dec ? dec.checklist : [], (out(es.match_precision) || {}).results, "")),
      el("div", { class: "box sec-response" }, el("h3", null, "Response"),
        gener ? el("div", { class: "text" }, gener.response || "") : (failedNote(steps.generate, "Generation") || el("p", { class: "note" }, steps.generate ? "Not done yet." : "Not part of this run's task."))),
      el("div", { class: "box sec-judge" }, el("h3", null, "Judge ", judge ? el("span", { class: "score-big" }, judge.score + "/10") : null),
        judge ? el("div", { class: "text" }, judge.analysis || "") : (failedNote(es.judge, "Judging") || el("p", { class: "note" }, "No judgement."))),
      el("div", { class: "box sec-steps" }, el("h3", null, "Steps"),
        el("table", { class: "steps" }, el("tr", null, ["step", "status", "model", "attempts", "tokens (prompt + completion)", "cost", "error"].map((t) => el("th", null, t))),
          all.map(([n, s, scope]) => stepRows(n, s, scope)))));
  }

  async function showInstance(params) {
    const view = document.getElementById("view-instance");
    show("instance");
    window.scrollTo(0, 0);
    try {
      await loadIndex();
      const R = IDX.rows;
      const row = +params.get("i"), k = params.has("s") ? +params.get("s") : state.scorer;
      if (!(row >= 0 && row < R.inst.length)) throw new Error("no such row " + params.get("i"));
      const inst = IDX.instances[R.inst[row]];
      const cmp = params.has("c") ? +params.get("c") : null, ck = params.has("cs") ? +params.get("cs") : k;
      view.replaceChildren(el("p", { class: "muted" }, "Loading " + inst.id + "…"));
      const needed = [chunk("run" + R.run[row]), inst.sessions ? chunk("sessions") : null];
      if (cmp !== null) needed.push(chunk("run" + R.run[cmp]));
      const [det, sessions] = await Promise.all(needed);
      const detail = (r) => cache["run" + R.run[r]].then((c) => c[String(R.inst[r])]);
      const a = await detail(row), b = cmp !== null ? await detail(cmp) : null;
      const choices = [];
      for (const r of rowsOf[R.inst[row]]) for (const s of IDX.runs[R.run[r]].scorers) choices.push([r, s]);
      const pick = (id, value, onchange, withNone) => el("select", { id, onchange },
        withNone ? el("option", { value: "", text: "— nothing —" }) : null,
        choices.map(([r, s]) => el("option", { value: r + ":" + s, selected: value === r + ":" + s, text: runLabel(R.run[r]) + " · " + IDX.scorers[s] })));
      const go = (i, s, c, cs) => { location.hash = "i=" + i + "&s=" + s + (c !== null && c !== undefined ? "&c=" + c + "&cs=" + cs : ""); };
      const pos = filtered.indexOf(row);
      const nav = el("span", null, el("a", { href: "#instances" }, "← Instances"),
        pos >= 0 ? [" · ", el("a", { href: pos > 0 ? "#i=" + filtered[pos - 1] + "&s=" + k : null, id: "prev" }, "‹ previous"),
          " " + (pos + 1) + " of " + filtered.length + " ",
          el("a", { href: pos < filtered.length - 1 ? "#i=" + filtered[pos + 1] + "&s=" + k : null, id: "next" }, "next ›")] : null);
      const m = inst.metadata || {};
      view.replaceChildren(
        el("div", { class: "inst-head" }, el("h1", null, inst.id), el("span", { class: "badge" }, inst.type),
          el("span", { class: "muted" }, "persona " + (inst.persona || "?") + (inst.tokens ? " · history ≈" + inst.tokens.toLocaleString("en-US") + " tokens" : "")), nav),
        el("div", { class: "controls" },
          el("label", null, "Showing", pick("pick-a", row + ":" + k, (e) => { const [r, s] = e.target.value.split(":"); go(r, s, cmp, ck); })),
          el("label", null, "Side by side with", pick("pick-b", cmp !== null ? cmp + ":" + ck : "", (e) => {
            if (!e.target.value) go(row, k); else { const [r, s] = e.target.value.split(":"); go(row, k, r, s); } }, true))),
        el("div", { class: "box sec-request" }, el("h2", null, "Request"), el("div", { class: "text" }, inst.request || "(instance data not found)")),
        el("div", { class: "box sec-truth" }, el("h2", null, "Ground truth"),
          inst.preference ? [el("p", null, el("b", null, "Context factor: "), inst.factor), el("p", null, el("b", null, "Preference: "), inst.preference),
            el("ol", null, (inst.checklist || []).map((c) => el("li", null, c))),
            m.contrastive_context_factor ? el("p", { class: "muted" }, "Contrastive factor: " + m.contrastive_context_factor) : null]
            : el("p", { class: "note" }, "Not available: the instance data were not found.")),
        sessionsBox(inst, sessions, IDX.runs[R.run[row]].setting),
        el("div", { class: "panels" + (b ? " two" : ""), id: "panels" }, panel(row, k, a, inst), b ? panel(cmp, ck, b, inst) : null));
      setStatus("");
    } catch (err) { fail(view, err); }
  }

  // ---------------------------------------------------------------- routing
  async function showInstances(params) {
    show("instances");
    const view = document.getElementById("view-instances");
    try {
      await loadIndex();
      let changed = false;
      for (const key of ["q", "type", "model", "setting", "failed", "f1min", "f1max", "jmin", "jmax"]) {
        if (params.has(key)) { state[key] = params.get(key); changed = true; }
      }
      if (params.has("scorer")) { state.scorer = +params.get("scorer"); changed = true; }
      if (!built || changed) buildBrowser(); else renderTable();
    } catch (err) { fail(view, err); }
  }
  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    const params = new URLSearchParams(hash);
    if (params.has("i")) return showInstance(params);
    if (hash === "instances" || hash.startsWith("instances&")) return showInstances(params);
    show("summary");
    const target = hash && hash !== "summary" ? document.getElementById(hash) : null;
    if (target) target.scrollIntoView(); else if (hash === "summary") window.scrollTo(0, 0);
  }
  window.addEventListener("hashchange", route);
  window.cupidReport = { ready: false, loadIndex, state: () => state, filtered: () => filtered };
  route();
  loadIndex().then(() => {
    window.cupidReport.ready = true;
    setStatus(IDX.rows.inst.length + " instance results · " + IDX.runs.length + " runs");
  }).catch((err) => { console.error(err); setStatus("data could not be read: " + err.message); });
})();
