// The annotation page (synthesis/annotation.py): one task at a time, "Submit & Next Task"
// once every sub-preference (and the realism of a request) is answered, and the answers
// saved as a JSON file the annotator sends back. Answers are also kept in the browser's
// localStorage, so a reload loses nothing.
(function () {
  "use strict";
  var meta = JSON.parse(document.getElementById("annotation-page").textContent);
  var tasks = Array.prototype.slice.call(document.querySelectorAll("section.task"));
  var storeKey = "cupid-annotation:" + meta.page;
  var current = 0;
  var annotator = document.getElementById("annotator");
  var status = document.getElementById("status");

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
    var n = section.querySelectorAll(".entry").length;
    return Object.keys(a.entries).length === n && (section.getAttribute("data-kind") !== "request" || a.realism);
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

  function keep() {
    try { localStorage.setItem(storeKey, JSON.stringify(answers())); } catch (e) { /* private mode: no store */ }
  }

  function restore() {
    var saved = null;
    try { saved = JSON.parse(localStorage.getItem(storeKey) || "null"); } catch (e) { saved = null; }
    if (!saved) return;
    annotator.value = saved.annotator || "";
    tasks.forEach(function (section) {
      var a = saved.tasks[section.getAttribute("data-task")];
      if (!a) return;
      Object.keys(a.entries || {}).forEach(function (index) {
        var input = section.querySelector('.entry[data-entry="' + index + '"] input[value="' + a.entries[index] + '"]');
        if (input) input.checked = true;
      });
      var r = a.realism && section.querySelector('.realism input[value="' + a.realism + '"]');
      if (r) r.checked = true;
    });
  }

  function progress() {
    status.textContent = tasks.filter(complete).length + " of " + tasks.length + " tasks answered";
  }

  function show(k) {
    current = Math.max(0, Math.min(tasks.length - 1, k));
    tasks.forEach(function (section, i) { section.hidden = i !== current; });
    progress();
    document.getElementById("previous").disabled = current === 0;
    window.scrollTo(0, 0);
  }

  document.getElementById("previous").addEventListener("click", function () { show(current - 1); });
  document.getElementById("next").addEventListener("click", function () {
    if (!complete(tasks[current])) {
      status.textContent = "Answer every sub-preference" +
        (tasks[current].getAttribute("data-kind") === "request" ? " and the realism" : "") + " first.";
      return;
    }
    keep();
    show(current + 1);
  });
  document.getElementById("save").addEventListener("click", function () {
    var data = answers();
    if (!data.annotator) { status.textContent = "Enter your annotator ID first."; annotator.focus(); return; }
    keep();
    var blob = new Blob([JSON.stringify(data, null, 1)], {type: "application/json"});
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "annotations-" + meta.page + "-" + data.annotator.replace(/[^A-Za-z0-9._-]+/g, "_") + ".json";
    document.body.appendChild(link);
    link.click();
    link.remove();
    status.textContent = "Saved " + link.download + ": send this file back.";
  });
  document.addEventListener("change", function () { keep(); progress(); });
  restore();
  show(0);
  window.cupidAnnotation = {answers: answers, ready: true};
})();
