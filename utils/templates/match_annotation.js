// The annotation page of evaluation/report/annotation_page.py (Figure 12's task): one pair at a
// time, each checklist entry rated Fully, Partially or Not Covered; the labels are kept in
// localStorage and saved by download as rows (pair_id, annotator, preference, checklist,
// labels), the format docs/match_agreement.md describes.
(function () {
  "use strict";
  var LABELS = ["Fully Covered", "Partially Covered", "Not Covered"];
  var source = document.getElementById("pairs");
  var pairs = JSON.parse(source.textContent);
  var storeKey = "cupid-match-annotation:" + source.getAttribute("data-page");
  var state = {annotator: "", index: 0, labels: {}};
  try { Object.assign(state, JSON.parse(localStorage.getItem(storeKey) || "{}")); } catch (e) { /* a fresh start */ }
  var $ = function (id) { return document.getElementById(id); };

  function save() {
    try { localStorage.setItem(storeKey, JSON.stringify(state)); } catch (e) { /* private mode: kept until closed */ }
  }
  function labelsOf(pair) {
    var labels = state.labels[pair.pair_id];
    if (!labels || labels.length !== pair.checklist.length) {
      labels = state.labels[pair.pair_id] = pair.checklist.map(function () { return null; });
    }
    return labels;
  }
  function complete(pair) { return labelsOf(pair).every(function (l) { return l !== null; }); }
  function rows() {
    return pairs.filter(complete).map(function (pair) {
      return {pair_id: pair.pair_id, annotator: state.annotator.trim(), preference: pair.preference,
              checklist: pair.checklist.slice(), labels: labelsOf(pair).slice()};
    });
  }
  function csvCell(value) {
    var text = typeof value === "string" ? value : JSON.stringify(value);
    return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }
  function csv() {
    var columns = ["pair_id", "annotator", "preference", "checklist", "labels"];
    return [columns.join(",")].concat(rows().map(function (row) {
      return columns.map(function (c) { return csvCell(row[c]); }).join(",");
    })).join("\r\n") + "\r\n";
  }
  function download(text, type, extension) {
    var name = "match_labels_" + (state.annotator.trim().replace(/[^A-Za-z0-9_-]+/g, "_") || "anonymous") + extension;
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text], {type: type}));
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    $("saved").textContent = "saved " + rows().length + " of " + pairs.length + " tasks to " + name;
  }

  function render() {
    var finished = state.index >= pairs.length;
    $("task").hidden = finished;
    $("done").hidden = !finished;
    $("task-no").textContent = String(Math.min(state.index + 1, pairs.length));
    $("annotator").value = state.annotator;
    if (finished) { return; }
    var pair = pairs[state.index], labels = labelsOf(pair);
    $("preference").textContent = pair.preference;
    var list = $("entries");
    list.textContent = "";
    pair.checklist.forEach(function (entry, k) {
      var item = document.createElement("li");
      var text = document.createElement("div");
      text.className = "text";
      text.textContent = "(" + (k + 1) + ") " + entry;
      var question = document.createElement("div");
      question.className = "question";
      question.textContent = "(" + (k + 1) + ") is Covered in Criterion?";
      var choices = document.createElement("div");
      choices.className = "choices";
      LABELS.forEach(function (label) {
        var option = document.createElement("label");
        var input = document.createElement("input");
        input.type = "radio";
        input.name = "entry-" + k;
        input.value = label;
        input.checked = labels[k] === label;
        input.addEventListener("change", function () { labels[k] = label; save(); update(); });
        option.appendChild(input);
        option.appendChild(document.createTextNode(" " + label));
        choices.appendChild(option);
      });
      item.appendChild(text);
      item.appendChild(question);
      item.appendChild(choices);
      list.appendChild(item);
    });
    update();
  }
  function update() {
    var pair = pairs[state.index];
    var open = pair ? labelsOf(pair).filter(function (l) { return l === null; }).length : 0;
    var named = state.annotator.trim() !== "";
    $("next").disabled = open > 0 || !named;
    $("back").disabled = state.index === 0;
    $("missing").textContent = !named ? "enter your annotator id above" :
      open ? open + " entr" + (open === 1 ? "y" : "ies") + " still to rate" : "";
  }

  $("annotator").addEventListener("input", function (event) { state.annotator = event.target.value; save(); update(); });
  $("next").addEventListener("click", function () { state.index += 1; save(); render(); window.scrollTo(0, 0); });
  $("back").addEventListener("click", function () { state.index = Math.max(0, state.index - 1); save(); render(); });
  $("review").addEventListener("click", function () { state.index = 0; save(); render(); });
  $("download-csv").addEventListener("click", function () { download(csv(), "text/csv", ".csv"); });
  $("download-json").addEventListener("click", function () {
    download(JSON.stringify(rows(), null, 2) + "\n", "application/json", ".json");
  });
  render();
  window.cupidAnnotation = {ready: true, rows: rows};
})();
