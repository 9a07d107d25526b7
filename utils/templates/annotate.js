// The annotation pages' script: the validation's (synthesis/annotation.py, Figure 11) and the
// matcher's (evaluation/report/annotation_page.py, Figure 12). A page holds its tasks as hidden
// sections, each entry a group of radio buttons; it shows one task at a time, "Submit & Next
// Task" once the annotator has an ID and every entry (and a request's realism) is answered. The
// answers and the place are kept in the browser's localStorage, so a reload loses nothing, and
// saved as a download: the validation's answers file, or the matcher's labels as CSV or JSON rows.
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var meta = JSON.parse($("annotation-page").textContent);
  var tasks = Array.prototype.slice.call(document.querySelectorAll("section.task"));
  var storeKey = "cupid-annotation:" + meta.page;
  var annotator = $("annotator"), status = $("status"), done = $("done");
  var current = 0;

  function answered(section) {
    var out = {entries: {}};
    section.querySelectorAll(".entry").forEach(function (entry) {
      var checked = entry.querySelector("input[type=radio]:checked");
      if (checked) out.entries[entry.getAttribute("data-entry")] = checked.value;
    });
    var realism = section.querySelector(".realism input:checked");
    if (realism) out.realism = Number(realism.value);
    return out;
  }

  function complete(section) {
    var a = answered(section);
    return Object.keys(a.entries).length === section.querySelectorAll(".entry").length &&
      (!section.querySelector(".realism") || a.realism !== undefined);
  }

  function answers() {
    var out = {format: meta.format, page: meta.page, annotator: annotator.value.trim(),
               saved_at: new Date().toISOString(), tasks: {}};
    tasks.forEach(function (section) {
      var a = answered(section);
      if (Object.keys(a.entries).length || a.realism) out.tasks[section.getAttribute("data-task")] = a;
    });
    return out;
  }

  // The matcher's labels: a row per pair whose every entry is rated (docs/match_agreement.md).
  function rows() {
    var pairs = $("pairs") ? JSON.parse($("pairs").textContent) : [];
    return pairs.map(function (pair, k) {
      var entries = answered(tasks[k]).entries;
      return complete(tasks[k]) && {pair_id: pair.pair_id, annotator: annotator.value.trim(),
        preference: pair.preference, checklist: pair.checklist,
        labels: pair.checklist.map(function (entry, i) { return entries[i]; })};
    }).filter(Boolean);
  }

  // utils/csv_file.py's rule: a text a spreadsheet would run as a formula gets a leading "'".
  function csvCell(value) {
    var text = typeof value === "string" ? value : JSON.stringify(value);
    if (text && (meta.csv_inert_starts || "").indexOf(text.charAt(0)) >= 0) text = "'" + text;
    return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function csvText(records, columns) {
    return [columns.join(",")].concat(records.map(function (record) {
      return columns.map(function (c) { return csvCell(record[c]); }).join(",");
    })).join("\r\n") + "\r\n";
  }

  var EXPORTS = {
    answers: function () { return [JSON.stringify(answers(), null, 1), "application/json", ".json"]; },
    json: function () { return [JSON.stringify(rows(), null, 2) + "\n", "application/json", ".json"]; },
    csv: function () {
      return [csvText(rows(), ["pair_id", "annotator", "preference", "checklist", "labels"]), "text/csv", ".csv"];
    }
  };

  function keep() {  // every checked radio button by its name, the annotator and the place
    var checked = {};
    document.querySelectorAll("section.task input:checked").forEach(function (i) { checked[i.name] = i.value; });
    var saved = {annotator: annotator.value, current: current, checked: checked};
    try { localStorage.setItem(storeKey, JSON.stringify(saved)); } catch (e) { /* private mode: no store */ }
  }

  function restore() {
    var saved = null;
    try { saved = JSON.parse(localStorage.getItem(storeKey) || "null"); } catch (e) { saved = null; }
    if (!saved || !saved.checked) return;
    annotator.value = saved.annotator || "";
    current = saved.current || 0;
    document.querySelectorAll("section.task input[type=radio]").forEach(function (i) {
      i.checked = saved.checked[i.name] === i.value;
    });
  }

  function update() {
    var section = tasks[current];
    var missing = !annotator.value.trim() ? "Enter your annotator ID first." :
      section && !complete(section) ? "Answer every " + meta.entry +
        (section.querySelector(".realism") ? " and the realism" : "") + " first." : "";
    $("next").disabled = !section || missing !== "";
    $("previous").disabled = current === 0;
    status.textContent = missing || tasks.filter(complete).length + " of " + tasks.length + " tasks answered";
  }

  function show(k) {
    current = Math.max(0, Math.min(tasks.length - (done ? 0 : 1), k));
    tasks.forEach(function (section, i) { section.hidden = i !== current; });
    if (done) done.hidden = current < tasks.length;
    if ($("task-no")) $("task-no").textContent = String(Math.min(current + 1, tasks.length));
    update();
    window.scrollTo(0, 0);
  }

  $("previous").addEventListener("click", function () { show(current - 1); keep(); });
  $("next").addEventListener("click", function () { show(current + 1); keep(); });
  if ($("review")) $("review").addEventListener("click", function () { show(0); keep(); });
  document.querySelectorAll("button[data-download]").forEach(function (button) {
    button.addEventListener("click", function () {
      var name = annotator.value.trim();
      if (!name) { status.textContent = "Enter your annotator ID first."; annotator.focus(); return; }
      keep();
      var made = EXPORTS[button.getAttribute("data-download")]();
      var link = document.createElement("a");
      link.href = URL.createObjectURL(new Blob([made[0]], {type: made[1]}));
      link.download = meta.file_prefix + name.replace(/[^A-Za-z0-9._-]+/g, "_") + made[2];
      document.body.appendChild(link);
      link.click();
      link.remove();
      status.textContent = "Saved " + link.download + ": send this file back.";
    });
  });
  document.addEventListener("change", function () { keep(); update(); });
  annotator.addEventListener("input", function () { keep(); update(); });
  restore();
  show(current);
  window.cupidAnnotation = {answers: answers, rows: rows, csv: csvText, ready: true};
})();
