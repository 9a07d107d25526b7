// The instance browser and instance pages of report.html. Vanilla JS, no network: the data
// sit in <script type="application/octet-stream" id="chunk-NAME"> elements (gzip bytes, see chunkBytes)
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
  let defaults = Object.assign({}, state);   // set once the index is read (scorer, sort)
  // The compare view: two runs, each "run:scorer"; the metric that decides "better"; filters.
  const cmp = { a: "", b: "", m: "f1", type: "", who: "", sort: "d", dir: 1, page: 0 };
  const cmpDefaults = Object.assign({}, cmp);
  let cmpRows = [];          // the compare view's list: [rowA, rowB] per shared instance, in view order

  // ---------------------------------------------------------------- helpers
  // A chunk's text back to its gzip bytes (utils/html_page.py byte_text): the page is
  // windows-1252, so a character is a byte, except that bytes 0x80-0x9F come as the
  // characters that encoding gives them, and 0x01 escapes the byte that follows (+ 0x40).
  const W1252 = "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f" +
    "\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";
  const HIGH = new Map([...W1252].map((c, k) => [c.charCodeAt(0), 0x80 + k]));
  function chunkBytes(text) {
    const out = new Uint8Array(text.length);
    let n = 0;
    for (let i = 0; i < text.length; i++) {
      let c = text.charCodeAt(i);
      if (c === 1) c = text.charCodeAt(++i) - 0x40;
      else if (c > 0xff || (c >= 0x80 && c < 0xa0)) {
        const b = HIGH.get(c);
        if (b === undefined) throw new Error("a data chunk holds a character the page's encoding cannot give (U+" + c.toString(16) + ")");
        c = b;
      }
      out[n++] = c;
    }
    return out.subarray(0, n);
  }
  async function inflate(node) {
    const bytes = chunkBytes(node.textContent);
    if (typeof DecompressionStream === "undefined") throw new Error("this browser lacks DecompressionStream; open the report in a current Chrome, Firefox or Safari");
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }
  function chunk(name) {
    if (!cache[name]) {
      cache[name] = (async () => {
        const node = document.getElementById("chunk-" + name);
        if (!node) throw new Error("no data chunk " + name);
        return JSON.parse(await inflate(node));
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
  // Model text as Markdown, built node by node (createElement and text nodes only, never
  // innerHTML), so nothing in the text can become markup: headings, lists, **bold**,
  // *italic*, `code` and fenced code blocks; everything else stays text.
  function mdInline(text) {
    const out = [];
    const re = /(`+)([^`]+?)\1|\*\*([^*]+?)\*\*|(?<![\w])__([^_]+?)__(?![\w])|\*([^*\s][^*]*?)\*|(?<![\w])_([^_\s][^_]*?)_(?![\w])/g;
    let last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) out.push(text.slice(last, m.index));
      if (m[2] !== undefined) out.push(el("code", null, m[2]));
      else if (m[3] !== undefined || m[4] !== undefined) out.push(el("strong", null, mdInline(m[3] !== undefined ? m[3] : m[4])));
      else out.push(el("em", null, mdInline(m[5] !== undefined ? m[5] : m[6])));
      last = re.lastIndex;
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }
  function markdown(text) {
    const lines = String(text === null || text === undefined ? "" : text).replace(/\r\n?/g, "\n").split("\n");
    const blocks = [];
    let para = [];
    const flush = () => { if (para.length) { blocks.push(el("p", null, mdInline(para.join("\n")))); para = []; } };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i], t = line.trim();
      if (!t) { flush(); continue; }
      if (t.startsWith("```")) {
        flush();
        const code = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith("```"); i++) code.push(lines[i]);
        blocks.push(el("pre", null, el("code", null, code.join("\n"))));
        continue;
      }
      const h = /^(#{1,6})\s+(.*?)\s*#*$/.exec(t);
      if (h) { flush(); blocks.push(el("h" + Math.min(6, h[1].length + 3), { class: "md-h" }, mdInline(h[2]))); continue; }
      const item = /^([-*+]|\d+[.)])\s+(.*)$/.exec(t);
      if (item) {
        flush();
        const ordered = /\d/.test(item[1][0]);
        const items = [];
        for (; i < lines.length; i++) {
          const mm = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i]);
          if (mm && /\d/.test(mm[1][0]) === ordered) items.push(el("li", null, mdInline(mm[2])));
          else if (lines[i].trim() && /^\s+/.test(lines[i]) && items.length) items[items.length - 1].append(" ", ...mdInline(lines[i].trim()));
          else { i--; break; }
        }
        blocks.push(el(ordered ? "ol" : "ul", null, items));
        continue;
      }
      para.push(t);
    }
    flush();
    return el("div", { class: "md-text" }, blocks);
  }
  // A view's state in the URL: the keys that differ from their defaults.
  function encodeState(obj, base, keys) {
    const params = new URLSearchParams();
    for (const k of keys || Object.keys(base)) if (String(obj[k]) !== String(base[k])) params.set(k, obj[k]);
    return params.toString();
  }
  function readState(obj, base, params) {
    for (const k of Object.keys(base)) {
      const v = params.has(k) ? params.get(k) : base[k];
      obj[k] = typeof base[k] === "number" ? +v : v;
    }
  }
  const BROWSER_KEYS = ["q", "type", "model", "setting", "scorer", "f1min", "f1max", "jmin", "jmax", "failed", "sort", "dir", "page"];
  const browserHash = () => { const q = encodeState(state, defaults, BROWSER_KEYS); return "instances" + (q ? "&" + q : ""); };
  const compareHash = () => { const q = encodeState(cmp, cmpDefaults); return "compare" + (q ? "&" + q : ""); };
  function setHash(hash) { if (location.hash.slice(1) !== hash) history.replaceState(null, "", "#" + hash); }
  function setStatus(text) { document.getElementById("status").textContent = text; }
  function fail(where, err) {
    console.error(err);
    where.replaceChildren(el("p", { class: "warning", text: "Could not show this view: " + (err && err.message || err) }));
  }
  function runLabel(r) {
    const run = IDX.runs[r];
    return run.label + (run.setting === "default" ? "" : " · " + run.setting) + (run.uses_labels ? " (uses labels)" : "");
  }
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
    defaults = Object.assign({}, state);
    const firstSide = (r) => r + ":" + (idx.runs[r].scorers.includes(state.scorer) ? state.scorer : idx.runs[r].scorers[0]);
    if (idx.runs.length && idx.runs[0].scorers.length) {
      cmpDefaults.a = firstSide(0);
      cmpDefaults.b = idx.runs.length > 1 && idx.runs[1].scorers.length ? firstSide(1) : cmpDefaults.a;
      if (!cmp.a) { cmp.a = cmpDefaults.a; cmp.b = cmpDefaults.b; }
    }
    IDX = idx;
    decorateSummary();
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
    ["fail", "Failed steps (\u2691 flagged)"], ["tok", "Tokens", "num"], ["cost", "Cost", "num"], ["req", "Request"]];

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
      el("button", { id: "f-reset", onclick: () => { Object.assign(state, defaults); built = false; buildBrowser(); } }, "Reset"));
    const head = el("tr", null, COLUMNS.map(([key, title, cls]) => el("th", {
      class: cls, "data-key": key, onclick: key === "req" ? null : () => {
        state.dir = state.sort === key ? -state.dir : 1; state.sort = key; state.page = 0; renderTable(); } }, title)));
    view.replaceChildren(el("h1", null, "Instances ", el("span", { class: "muted", id: "count" })),
      el("p", { class: "muted" }, "One row per model, setting and instance; metrics under the chosen scorer. Sorted worst first by default; click a header to sort, a row to open it. Cost: the instance's calls at the dated prices (an in-process model is free: $0.00000); \u201c+?\u201d marks a row with calls of a model that has no price (hover for which), whose cost is not in the figure."),
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
      const inst = IDX.instances[R.inst[row]], fails = R.fail[row] || [], flags = (R.flag && R.flag[row]) || [];
      const href = "#i=" + row + "&s=" + k + "&from=instances&" + browserHash().slice("instances&".length);
      return el("tr", { "data-row": row, onclick: (e) => { if (!e.target.closest("a")) location.hash = href.slice(1); } },
        el("td", null, el("a", { href }, inst.id)), el("td", { text: inst.type }),
        el("td", { text: IDX.runs[R.run[row]].label }), el("td", { text: IDX.runs[R.run[row]].setting }),
        el("td", { class: "num", text: pct(metric("p", row)) }), el("td", { class: "num", text: pct(metric("r", row)) }),
        el("td", { class: "num", text: pct(metric("f1", row)) }), el("td", { class: "num", text: num(metric("j", row), 0) }),
        el("td", { class: fails.length ? "fail" : (flags.length ? "flagged" : ""), text: fails.concat(flags.map((f) => "\u2691 " + f)).join(", "),
          title: flags.length ? "\u2691: read from an answer the provider filtered or the model refused" : null }),
        el("td", { class: "num", text: R.tok[row] ? R.tok[row].toLocaleString("en-US") : "—" }),
        el("td", { class: "num", text: cost(R.cost[row]) + (R.unpriced && R.unpriced[row] ? " +?" : ""),
          title: R.unpriced && R.unpriced[row] ? "priced steps only; no price for " + R.unpriced[row].join(", ") : null }), el("td", { class: "req", title: inst.request || "", text: inst.request || "" }));
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
    if (!document.getElementById("view-instances").hidden) setHash(browserHash());
  }

  // ---------------------------------------------------------------- instance page
  // A row's details and an instance's sessions, from the few chunks that hold them.
  const detail = (r) => chunk("run" + IDX.rows.run[r] + "-" + Math.floor(IDX.rows.inst[r] / IDX.part)).then((c) => c[String(IDX.rows.inst[r])]);
  async function sessionsOf(inst) {
    if (!inst.sessions) return null;
    const size = IDX.session_part, parts = [...new Set(inst.sessions.map((sid) => Math.floor(sid / size)))];
    const loaded = await Promise.all(parts.map((p) => chunk("sessions-" + p)));
    const out = {};
    parts.forEach((p, k) => loaded[k].forEach((record, j) => { out[p * size + j] = record; }));
    return out;
  }
  // What the run's context strategy showed: each session's place in the request (1-based), or
  // null when the run records none (the strategy rendered its own text, or an older run).
  function shownPlaces(shown) {
    if (!shown || !Array.isArray(shown.positions)) return null;
    const places = {};
    shown.positions.forEach((p, k) => { places[p] = k + 1; });
    return places;
  }
  function shownNote(inst, shown, setting) {
    if (!shown) return "";
    if (shown.error) return "; the strategy " + setting + " failed: " + shown.error;
    if (!Array.isArray(shown.positions)) return "; the strategy " + setting + " rendered its own text (≈" + (shown.history_tokens || 0).toLocaleString("en-US") + " tokens), naming no session";
    const relevant = new Set(inst.relevant || []), kept = shown.positions.filter((p) => relevant.has(p)).length;
    return "; " + setting + " showed " + shown.positions.length + " of " + inst.sessions.length +
      (relevant.size ? " (session recall " + kept + "/" + relevant.size + ")" : "");
  }
  function sessionsBox(inst, sessions, setting, shown) {
    if (!inst.sessions) {
      return el("div", { class: "box", id: "sessions" }, el("h2", null, "Prior sessions"),
        el("p", { class: "note" }, "The instance data were not found, so the sessions cannot be shown (relevant positions: " +
          ((inst.relevant || []).join(", ") || "none") + "). Pass --data_dir to the report."));
    }
    const places = shownPlaces(shown);
    const items = inst.sessions.map((sid, k) => {
      const [factor, pref, turns] = sessions[sid];
      const sameFactor = factor.trim() === (inst.factor || "").trim();
      const samePref = pref.trim() === (inst.preference || "").trim();
      const relevant = sameFactor && samePref;
      const badges = [];
      if (relevant) badges.push(el("span", { class: "badge relevant" }, "relevant: same factor and preference"));
      else if (sameFactor) badges.push(el("span", { class: "badge changed" }, "same factor, other preference"));
      else if (samePref) badges.push(el("span", { class: "badge changed" }, "same preference, other factor"));
      if (places) badges.push(places[k + 1] ? el("span", { class: "badge shown" }, "shown as session " + places[k + 1]) :
        el("span", { class: "badge hidden" }, "not shown"));
      const d = el("details", { class: "session" + (relevant ? " relevant" : "") + (places && !places[k + 1] ? " not-shown" : ""),
        "data-relevant": relevant ? "1" : "0", "data-shown": places ? (places[k + 1] ? "1" : "0") : "" },
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
        (shown ? shownNote(inst, shown, setting) : setting === "oracle" ? "; in the oracle setting the model saw only the sessions holding the current preference" : ""))),
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

  // How a step's answers ended (utils/models/endings.py), when one did not simply stop.
  function endingsText(step) {
    const counts = {};
    for (const e of step.endings || []) counts[e] = (counts[e] || 0) + 1;
    return Object.entries(counts).map(([e, n]) => (n > 1 ? e + " \u00d7" + n : e)).join(", ") || "stop";
  }

  function stepRows(name, step, scope) {
    const u = step.usage || {};
    const failed = step.status !== "done";
    const rows = [el("tr", { class: failed ? "fail" : (step.flagged ? "flagged" : "") }, el("td", null, name, scope ? el("span", { class: "muted" }, " (" + scope + ")") : null),
      el("td", null, step.status), el("td", null, step.model || ""), el("td", null, step.attempts || ""),
      el("td", { class: "ended" }, (step.flagged ? "\u2691 " : "") + endingsText(step)),
      el("td", null, (u.prompt_tokens || 0) + " + " + (u.completion_tokens || 0)), el("td", null, cost(step.cost)),
      el("td", null, step.error || ""))];
    if (step.raw && step.raw.length) {
      const raw = el("details", { open: failed, class: "raw" }, el("summary", null, (failed ? "Raw answers of the failed attempts (" : "Raw answers (") + step.raw.length + ")"),
        step.raw.map((text, k) => el("div", null, el("div", { class: "muted" }, "attempt " + (k + 1) + (step.endings ? " \u00b7 ended " + step.endings[k] : "")),
          el("pre", null, text === null ? "(no answer)" : (text === "" ? "(no text)" : String(text))))),
        step.request ? el("details", null, el("summary", null, "Request sent"), el("pre", null, JSON.stringify(step.request, null, 2))) : null);
      rows.push(el("tr", null, el("td", { colspan: 8 }, raw)));
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
    const unpriced = all.filter(([, s]) => (s.cost === undefined || s.cost === null) && s.usage && Object.keys(s.usage).length).map(([n]) => n);
    const costText = costs.length ? cost(costs.reduce((a, b) => a + b, 0)) : "—";
    const S = IDX.page_parts;
    const infer = out(steps[S.inferred]), gener = out(steps[S.response]), judge = out(es[S.judgement]), dec = out(es[S.checklist]);
    const summarize = out(steps[S.summaries]);
    const flagged = all.filter(([, s]) => s.flagged && s.status === "done");
    const et = det.error_classification && det.error_classification.scorer === scorer ? det.error_classification : null;
    return el("div", { class: "panel", "data-row": row, "data-scorer": k },
      el("h2", null, runLabel(R.run[row]), el("span", { class: "muted" }, " · scorer " + scorer)),
      flagged.length ? el("p", { class: "warning flag-note" }, "\u2691 Scores read from an answer that ended " +
        flagged.map(([n, s]) => s.flagged + " (" + n + ")").join(", ") +
        ": the text the model gave is read as the release reads it; the report's --exclude_filtered leaves these scores out.") : null,
      el("div", { class: "metrics" }, el("div", null, "P ", el("b", null, pct(inf.precision))), el("div", null, "R ", el("b", null, pct(inf.recall))),
        el("div", null, "F1 ", el("b", { class: "f1" }, pct(inf.f1))), el("div", null, "Judge ", el("b", { class: "judge" }, gen.score === undefined || gen.score === null ? "—" : gen.score)),
        el("div", null, "Tokens ", el("b", null, tokens.toLocaleString("en-US"))), el("div", { class: "cost" }, "Cost ", el("b", null, costText),
          unpriced.length ? el("span", { class: "muted" }, (costs.length ? " priced steps only; " : " ") + "no price for " + unpriced.join(", ")) : null)),
      summarize ? el("div", { class: "box" }, el("h3", null, "Session summaries (summary setting)"), el("pre", null, JSON.stringify(summarize.summaries || summarize, null, 2))) : null,
      el("div", { class: "box sec-inferred" }, el("h3", null, "Inferred preference"),
        infer ? [markdown(infer.preference || ""), infer.analysis ? el("details", null, el("summary", null, "The model's analysis"), markdown(infer.analysis)) : null]
          : (failedNote(steps[S.inferred], "Inference") || el("p", { class: "note" }, steps[S.inferred] ? "Not done yet." : "Not part of this run's task or setting."))),
      et ? el("div", { class: "box sec-error-type" }, el("h3", null, "Error type (Table 2) ", el("span", { class: "muted" }, "classified by " + (et.model || et.classifier))),
        out(et) ? [el("p", null, el("b", { class: "error-type" }, out(et).type)), markdown(out(et).analysis || "")]
          : [failedNote(et, "Classification"), (et.raw || []).length ? el("details", { class: "raw" }, el("summary", null, "Raw answers (" + et.raw.length + ")"),
            et.raw.map((text) => el("pre", null, text === null ? "(no answer)" : String(text)))) : null]) : null,
      el("div", { class: "box sec-recall" }, el("h3", null, "Ground-truth checklist ", el("span", { class: "muted" }, "does the inferred preference cover each entry? (recall)")),
        failedNote(es[S.recall], "Matching"), checklistTable(inst.checklist, (out(es[S.recall]) || {}).results, "")),
      el("div", { class: "box sec-precision" }, el("h3", null, "Inferred checklist ", el("span", { class: "muted" }, "does the ground truth cover each entry? (precision)")),
        failedNote(es[S.checklist], "Decomposition"), failedNote(es[S.precision], "Matching"),
        checklistTable(dec ? dec.checklist : [], (out(es[S.precision]) || {}).results, "")),
      el("div", { class: "box sec-response" }, el("h3", null, "Response"),
        gener ? markdown(gener.response || "") : (failedNote(steps[S.response], "Generation") || el("p", { class: "note" }, steps[S.response] ? "Not done yet." : "Not part of this run's task."))),
      el("div", { class: "box sec-judge" }, el("h3", null, "Judge ", judge ? el("span", { class: "score-big" }, judge.score + "/10") : null),
        judge ? markdown(judge.analysis || "") : (failedNote(es[S.judgement], "Judging") || el("p", { class: "note" }, "No judgement."))),
      el("div", { class: "box sec-steps" }, el("h3", null, "Steps"),
        el("div", { class: "table-wrap" }, el("table", { class: "steps" }, el("tr", null, ["step", "status", "model", "attempts", "ended", "tokens (prompt + completion)", "cost", "error"].map((t) => el("th", null, t))),
          all.map(([n, s, scope]) => stepRows(n, s, scope))))));
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
      const [a, b, sessions] = await Promise.all([detail(row), cmp !== null ? detail(cmp) : null, sessionsOf(inst)]);
      const choices = [];
      for (const r of rowsOf[R.inst[row]]) for (const s of IDX.runs[R.run[r]].scorers) choices.push([r, s]);
      const pick = (id, value, onchange, withNone) => el("select", { id, onchange },
        withNone ? el("option", { value: "", text: "— nothing —" }) : null,
        choices.map(([r, s]) => el("option", { value: r + ":" + s, selected: value === r + ":" + s,
          text: runLabel(R.run[r]) + " · " + IDX.scorers[s] + " · F1 " + pct(metric("f1", r, s)) + " · judge " + num(metric("j", r, s), 0) })));
      const listQuery = listState(params);
      const go = (i, s, c, cs) => { location.hash = "i=" + i + "&s=" + s + (c !== null && c !== undefined && c !== "" ? "&c=" + c + "&cs=" + cs : "") + listQuery; };
      const nav = el("span", { class: "list-nav" }, await listNav(params, row, k, cmp, ck, listQuery));
      const everyRun = el("div", { class: "box sec-runs" }, el("h2", null, "This instance in every run ",
        el("span", { class: "muted" }, "one click opens it; \u201cbeside\u201d puts it next to the one shown")),
        el("div", { class: "table-wrap" }, el("table", { class: "grid runs" }, el("tr", null, ["Run", "Scorer", "F1", "Judge", ""].map((t) => el("th", null, t))),
          choices.map(([r, s]) => {
            const here = (r === row && s === k) || (r === cmp && s === ck);
            return el("tr", { class: here ? "here" : "" }, el("td", null, el("a", { href: "#i=" + r + "&s=" + s + listQuery, class: "open-run" }, runLabel(R.run[r]))),
              el("td", { text: IDX.scorers[s] }), el("td", { class: "num", text: pct(metric("f1", r, s)) }),
              el("td", { class: "num", text: num(metric("j", r, s), 0) }),
              el("td", null, r === row && s === k ? el("span", { class: "muted" }, "shown") :
                el("a", { href: "#i=" + row + "&s=" + k + "&c=" + r + "&cs=" + s + listQuery, class: "beside" }, "beside")));
          }))));
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
        everyRun,
        sessionsBox(inst, sessions, IDX.runs[R.run[row]].setting, a.shown),
        el("div", { class: "panels" + (b ? " two" : ""), id: "panels" }, panel(row, k, a, inst), b ? panel(cmp, ck, b, inst) : null));
      setStatus("");
    } catch (err) { fail(view, err); }
  }

  // ---------------------------------------------------------------- lists an instance page steps through
  function listState(params) {
    const p = new URLSearchParams(params);
    for (const k of ["i", "s", "c", "cs"]) p.delete(k);
    const q = p.toString();
    return q ? "&" + q : "";
  }
  async function listNav(params, row, k, other, otherScorer, listQuery) {
    const from = params.get("from") || "";
    let back = el("a", { href: "#" + browserHash() }, "← Instances"), hrefs = [], pos = -1, name = "";
    if (from === "instances") {
      readState(state, defaults, params);
      applyFilters();
      pos = filtered.indexOf(row);
      hrefs = filtered.map((r) => "#i=" + r + "&s=" + k + listQuery);
      name = "the filtered instances";
    } else if (from === "compare") {
      readState(cmp, cmpDefaults, params);
      computeCompare();
      const A = side(cmp.a), B = side(cmp.b);
      pos = cmpRows.findIndex(([a, b]) => a === row && b === other);
      hrefs = cmpRows.map(([a, b]) => "#i=" + a + "&s=" + A.s + "&c=" + b + "&cs=" + B.s + listQuery);
      back = el("a", { href: "#" + compareHash() }, "← Compare");
      name = "the compared instances";
    } else if (from.startsWith("worst-") && IDX.worst[from.slice(6)]) {
      const w = IDX.worst[from.slice(6)];
      pos = w.rows.indexOf(row);
      hrefs = w.rows.map((r) => "#i=" + r + "&s=" + w.scorer + listQuery);
      back = el("a", { href: "#worst-instances" }, "← Worst instances");
      name = from === "worst-f1" ? "the lowest F1" : "the lowest judge scores";
    }
    if (pos < 0) return [back];
    return [back, " · ", el("a", { href: pos > 0 ? hrefs[pos - 1] : null, id: "prev" }, "‹ previous"),
      " " + (pos + 1) + " of " + hrefs.length + " in " + name + " ",
      el("a", { href: pos < hrefs.length - 1 ? hrefs[pos + 1] : null, id: "next" }, "next ›")];
  }

  // ---------------------------------------------------------------- compare view
  const side = (v) => { const [r, s] = String(v).split(":").map(Number); return { r, s }; };
  const runRowCache = {};
  function rowsOfRun(r) {
    if (!runRowCache[r]) {
      const m = new Map();
      IDX.rows.run.forEach((run, row) => { if (run === r) m.set(IDX.rows.inst[row], row); });
      runRowCache[r] = m;
    }
    return runRowCache[r];
  }
  function sideChoices() {
    const out = [];
    IDX.runs.forEach((run, r) => run.scorers.forEach((s) => out.push([r + ":" + s, runLabel(r) + " · " + IDX.scorers[s]])));
    return out;
  }
  function pairStats(A, B) {
    const ka = A.r + ":" + A.s, kb = B.r + ":" + B.s;
    const forward = A.r < B.r || (A.r === B.r && A.s <= B.s);
    const entry = IDX.compare.pairs[forward ? ka + "|" + kb : kb + "|" + ka];
    if (!entry) return null;
    return { f1: entry[forward ? "f1" : "f1_rev"], j: entry[forward ? "j" : "j_rev"] };
  }
  let cmpEntries = [];
  function computeCompare() {
    const A = side(cmp.a), B = side(cmp.b), R = IDX.rows;
    const mapA = rowsOfRun(A.r), mapB = rowsOfRun(B.r);
    const all = [];
    for (const [inst, ra] of mapA) {
      const rb = mapB.get(inst);
      if (rb === undefined) continue;
      const fa = metric("f1", ra, A.s), fb = metric("f1", rb, B.s), ja = metric("j", ra, A.s), jb = metric("j", rb, B.s);
      all.push({ ra, rb, inst, type: IDX.instances[inst].type, fa, fb, ja, jb,
        df: fa === null || fb === null ? null : fa - fb, dj: ja === null || jb === null ? null : ja - jb });
    }
    const who = (e) => { const d = cmp.m === "j" ? e.dj : e.df; return d === null ? "" : d > 1e-9 ? "a" : d < -1e-9 ? "b" : "tie"; };
    const counts = { a: 0, tie: 0, b: 0, "": 0 };
    for (const e of all) { e.who = who(e); counts[e.who]++; }
    const shown = all.filter((e) => (!cmp.type || e.type === cmp.type) && (!cmp.who || e.who === cmp.who));
    const keyName = cmp.sort === "d" ? (cmp.m === "j" ? "dj" : "df") : cmp.sort;
    const key = keyName === "id" ? (e) => IDX.instances[e.inst].id : (e) => e[keyName];
    shown.sort((x, y) => {
      const a = key(x), b = key(y);
      if (a === null && b === null) return x.inst - y.inst;
      if (a === null) return 1;
      if (b === null) return -1;
      return a < b ? -cmp.dir : a > b ? cmp.dir : x.inst - y.inst;
    });
    cmpEntries = shown;
    cmpRows = shown.map((e) => [e.ra, e.rb]);
    return { all, shown, counts };
  }
  function scatter(entries, A, B) {
    const NS = "http://www.w3.org/2000/svg", W = 300, P = 34;
    const judge = cmp.m === "j", lo = judge ? 1 : 0, hi = judge ? 10 : 100;
    const sx = (v) => P + (v - lo) / (hi - lo) * (W - P - 8), sy = (v) => W - P - (v - lo) / (hi - lo) * (W - P - 8);
    const node = (tag, attrs, ...kids) => { const n = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); n.append(...kids); return n; };
    const svg = node("svg", { viewBox: "0 0 " + W + " " + W, class: "scatter", role: "img", "aria-label": "A against B, one point per instance" });
    svg.append(node("line", { x1: sx(lo), y1: sy(lo), x2: sx(hi), y2: sy(hi), class: "diag" }),
      node("line", { x1: P, y1: W - P, x2: W - 8, y2: W - P, class: "axis" }), node("line", { x1: P, y1: 8, x2: P, y2: W - P, class: "axis" }));
    for (const t of judge ? [1, 4, 7, 10] : [0, 50, 100]) {
      svg.append(node("text", { x: sx(t), y: W - P + 13, class: "tick", "text-anchor": "middle" }, String(t)),
        node("text", { x: P - 4, y: sy(t) + 3, class: "tick", "text-anchor": "end" }, String(t)));
    }
    svg.append(node("text", { x: (W + P) / 2, y: W - 4, class: "lab", "text-anchor": "middle" }, "A: " + runLabel(A.r)),
      node("text", { x: 10, y: (W - P) / 2, class: "lab", "text-anchor": "middle", transform: "rotate(-90 10 " + (W - P) / 2 + ")" }, "B: " + runLabel(B.r)));
    const q = listState(new URLSearchParams(compareHash().slice(8) + "&from=compare"));
    for (const e of entries) {
      const va = judge ? e.ja : e.fa, vb = judge ? e.jb : e.fb;
      if (va === null || vb === null) continue;
      const jit = judge ? ((e.inst * 7919) % 17 - 8) / 40 : 0, jit2 = judge ? ((e.inst * 104729) % 13 - 6) / 30 : 0;
      const a = node("a", { href: "#i=" + e.ra + "&s=" + A.s + "&c=" + e.rb + "&cs=" + B.s + q, class: "pt pt-" + e.who });
      a.append(node("circle", { cx: sx(va * (judge ? 1 : 100) + jit), cy: sy(vb * (judge ? 1 : 100) + jit2), r: 3 },
        node("title", {}, IDX.instances[e.inst].id + ": A " + (judge ? va : pct(va)) + ", B " + (judge ? vb : pct(vb)))));
      svg.append(a);
    }
    return svg;
  }
  function renderCompare() {
    const view = document.getElementById("view-compare"), R = IDX.rows;
    const A = side(cmp.a), B = side(cmp.b);
    const { all, shown, counts } = computeCompare();
    setHash(compareHash());
    const set = (key) => (e) => { cmp[key] = e.target.value; cmp.page = 0; renderCompare(); };
    const choices = sideChoices();
    const pick = (id, key) => el("select", { id, onchange: set(key) }, choices.map(([v, t]) => el("option", { value: v, selected: cmp[key] === v, text: t })));
    const stats = pairStats(A, B);
    const statLine = (key, what) => {
      const st = stats && stats[key];
      if (st) return el("tr", { "data-metric": key }, el("td", null, what), el("td", { class: "num" }, st.a), el("td", { class: "num" }, st.b),
        el("td", { class: "num diff" }, st.d), el("td", { class: "num" }, st.p), el("td", { class: "num" }, String(st.n)));
      const ds = all.map((e) => (key === "j" ? e.dj : e.df)).filter((d) => d !== null);
      if (!ds.length) return null;
      const mean = ds.reduce((x, y) => x + y, 0) / ds.length;
      return el("tr", { "data-metric": key }, el("td", null, what + " (mean per instance)"), el("td", null, "—"), el("td", null, "—"),
        el("td", { class: "num diff" }, key === "j" ? mean.toFixed(2) : (100 * mean).toFixed(1)), el("td", { colspan: 2, class: "muted" },
          "no paired interval: the summary pairs runs of one model or one setting"), );
    };
    const PAGE_C = 100, pages = Math.max(1, Math.ceil(shown.length / PAGE_C));
    cmp.page = Math.min(+cmp.page, pages - 1);
    const q = listState(new URLSearchParams(compareHash().slice(8) + "&from=compare"));
    const open = (e) => "#i=" + e.ra + "&s=" + A.s + "&c=" + e.rb + "&cs=" + B.s + q;
    const th = (key, title, cls) => el("th", { class: (cls || "") + (cmp.sort === key ? (cmp.dir === 1 ? " sorted-asc" : " sorted-desc") : ""), "data-key": key,
      onclick: () => { cmp.dir = cmp.sort === key ? -cmp.dir : 1; cmp.sort = key; cmp.page = 0; renderCompare(); } }, title);
    const fmtD = (d, judge) => (d === null ? "—" : (d > 0 ? "+" : "") + (judge ? d.toFixed(0) : (100 * d).toFixed(1)));
    const types = [...new Set(all.map((e) => e.type))];
    const sign = (d) => (d === null ? "" : d > 1e-9 ? "pos" : d < -1e-9 ? "neg" : "");
    const label = { a: "A better", tie: "tie", b: "B better" };
    view.replaceChildren(
      el("h1", null, "Compare two runs ", el("span", { class: "muted", id: "cmp-count" }, shown.length + " of " + all.length + " shared instances")),
      el("div", { class: "controls" }, el("label", null, "A", pick("cmp-a", "a")), el("label", null, "B", pick("cmp-b", "b")),
        el("label", null, "Better by", el("select", { id: "cmp-m", onchange: set("m") }, [["f1", "F1"], ["j", "judge score"]].map(([v, t]) => el("option", { value: v, selected: cmp.m === v, text: t })))),
        el("label", null, "Type", el("select", { id: "cmp-type", onchange: set("type") }, el("option", { value: "", text: "all types" }), types.map((t) => el("option", { value: t, selected: cmp.type === t, text: t })))),
        el("label", null, "Outcome", el("select", { id: "cmp-who", onchange: set("who") }, el("option", { value: "", text: "all" }),
          ["a", "tie", "b"].map((w) => el("option", { value: w, selected: cmp.who === w, text: label[w] + " (" + counts[w] + ")" }))))),
      el("div", { class: "cmp-top" },
        el("div", { class: "cmp-stats" },
          el("p", { class: "counts", id: "cmp-counts" }, ["a", "tie", "b"].map((w) => el("a", { href: "#" + compareHash().replace(/&who=[^&]*/, "") + "&who=" + w, class: "count count-" + w },
            el("b", null, String(counts[w])), " " + label[w])), counts[""] ? el("span", { class: "muted" }, " · " + counts[""] + " not scored on both") : null,
            el("span", { class: "muted" }, " (by " + (cmp.m === "j" ? "judge score" : "per-instance F1") + ")")),
          el("div", { class: "table-wrap" }, el("table", { class: "grid cmp-paired", id: "cmp-paired" },
            el("tr", null, ["Paired difference", "A", "B", "A − B [95% CI]", "p", "n paired"].map((t) => el("th", null, t))),
            statLine("f1", "F1 (micro)"), statLine("j", "judge score"))),
          el("p", { class: "muted" }, "The numbers of the summary's paired-differences table: A − B on the instances both have, paired bootstrap 95% interval clustered by persona (each resample draws personas, with all their instances). Click a point or a row to open the instance side by side.")),
        el("div", { class: "cmp-plot" }, scatter(shown, A, B))),
      el("div", { class: "table-wrap" }, el("table", { class: "grid", id: "compare-table" },
        el("thead", null, el("tr", null, th("id", "Instance"), th("type", "Type"), th("fa", "F1 A", "num"), th("fb", "F1 B", "num"), th("df", "ΔF1", "num"),
          th("ja", "Judge A", "num"), th("jb", "Judge B", "num"), th("dj", "ΔJudge", "num"))),
        el("tbody", null, shown.slice(cmp.page * PAGE_C, (cmp.page + 1) * PAGE_C).map((e) => {
          const href = open(e);
          return el("tr", { class: "who-" + e.who, onclick: (ev) => { if (!ev.target.closest("a")) location.hash = href.slice(1); } },
            el("td", null, el("a", { href }, IDX.instances[e.inst].id)), el("td", { text: e.type }),
            el("td", { class: "num", text: pct(e.fa) }), el("td", { class: "num", text: pct(e.fb) }), el("td", { class: "num " + sign(e.df), text: fmtD(e.df, false) }),
            el("td", { class: "num", text: num(e.ja, 0) }), el("td", { class: "num", text: num(e.jb, 0) }), el("td", { class: "num " + sign(e.dj), text: fmtD(e.dj, true) }));
        })))),
      el("div", { class: "pager" }, el("button", { disabled: cmp.page === 0, onclick: () => { cmp.page--; renderCompare(); } }, "‹ Prev"),
        el("span", { text: "page " + (cmp.page + 1) + " of " + pages }),
        el("button", { disabled: cmp.page >= pages - 1, onclick: () => { cmp.page++; renderCompare(); } }, "Next ›")));
  }
  async function showCompare(params) {
    show("compare");
    const view = document.getElementById("view-compare");
    try {
      await loadIndex();
      if (!sideChoices().length) {
        view.replaceChildren(el("h1", null, "Compare two runs"), el("p", { class: "note" }, "No run has a scorer's results to compare."));
        return;
      }
      readState(cmp, cmpDefaults, params);
      renderCompare();
    } catch (err) { fail(view, err); }
  }

  // ---------------------------------------------------------------- summary extras
  function decorateSummary() {
    // Each row of the paired-differences table opens its compare view.
    const head = document.getElementById("paired-differences");
    let node = head ? head.nextElementSibling : null;
    while (node && !node.classList.contains("table-wrap") && !/^H[12]$/.test(node.tagName)) node = node.nextElementSibling;
    if (!node || !node.classList.contains("table-wrap") || node.dataset.decorated) return;
    node.dataset.decorated = "1";
    const table = node.querySelector("table");
    table.tHead.rows[0].append(el("th", null, "Compare"));
    [...table.tBodies[0].rows].forEach((tr, k) => {
      const spec = IDX.compare.rows[k];
      tr.append(el("td", null, spec ? el("a", { class: "compare-link", href: "#compare&a=" + spec.a.join(":") + "&b=" + spec.b.join(":") + "&m=" + spec.m }, "instance by instance ›") : ""));
    });
  }
  function copyButtons() {
    for (const button of document.querySelectorAll(".code-block .copy")) {
      button.addEventListener("click", async () => {
        const pre = button.parentElement.querySelector("pre");
        const text = pre.textContent;
        try {
          if (!navigator.clipboard) throw new Error("no clipboard");
          await navigator.clipboard.writeText(text);
          button.textContent = "Copied";
        } catch (err) {
          const range = document.createRange();
          range.selectNodeContents(pre);
          const sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
          button.textContent = document.execCommand && document.execCommand("copy") ? "Copied" : "Selected: press Ctrl+C";
        }
        setTimeout(() => { button.textContent = "Copy"; }, 2000);
      });
    }
  }

  // ---------------------------------------------------------------- routing
  async function showInstances(params) {
    show("instances");
    const view = document.getElementById("view-instances");
    try {
      await loadIndex();
      const given = BROWSER_KEYS.some((k) => params.has(k));
      if (given) readState(state, defaults, params);
      if (!built || given) buildBrowser(); else renderTable();
    } catch (err) { fail(view, err); }
  }
  function route() {
    const raw = location.hash.slice(1);
    const params = new URLSearchParams(raw);
    if (params.has("i")) return showInstance(params);
    if (raw === "instances" || raw.startsWith("instances&")) return showInstances(params);
    if (raw === "compare" || raw.startsWith("compare&")) return showCompare(params);
    show("summary");
    let id = raw;
    try { id = decodeURIComponent(raw); } catch (err) { /* a malformed escape: look the raw text up */ }
    const target = id && id !== "summary" ? document.getElementById(id) : null;
    if (target) target.scrollIntoView(); else if (raw === "summary") window.scrollTo(0, 0);
  }
  window.addEventListener("hashchange", route);
  copyButtons();
  window.cupidReport = { ready: false, loadIndex, index: () => IDX, state: () => state, filtered: () => filtered, compare: () => cmp, compareRows: () => cmpRows, markdown, chunkBytes, chunk };
  route();
  loadIndex().then(() => {
    window.cupidReport.ready = true;
    setStatus(IDX.rows.inst.length + " instance results · " + IDX.runs.length + " runs");
  }).catch((err) => { console.error(err); setStatus("data could not be read: " + err.message); });
})();
