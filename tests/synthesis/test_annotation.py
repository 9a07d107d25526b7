"""The validation's annotation pages (Figure 11) in headless Chromium, and annotators' answers
folded back in: at least one annotator's "expressed" makes an entry expressed, Krippendorff's
alpha between annotators, the validator's agreement with them, the instances to revise."""
from __future__ import annotations

import json
import os
import re
import time

import pytest

import validation_data as vd
from browser import Browser, find_chromium
from cupid.synthesis.validation.annotation import FORMAT
from cupid.synthesis.validation.cli import main
from cupid.utils.errors import BadInput
from cupid.synthesis.validation.engine import validate
from fake_llm_server import FakeLLMServer
from repo_paths import ARTIFACTS

REQUIRED = os.environ.get("CUPID_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """A validation of the planted data set, its pages 3 tasks each."""
    root = tmp_path_factory.mktemp("annotation")
    with FakeLLMServer(responder=vd.Validator()) as server:
        model = f"vllm:validator@{server.openai_base_url}"
        validate(vd.build(root / "data"), output_dir=root / "out", model=model, tasks_per_page=3, n_workers=2)
        yield {"root": root, "out": root / "out", "model": model,
               "tasks": json.loads((root / "out" / "annotation" / "tasks.json").read_text())}


def task(tasks, persona, kind, pref):
    return next(t for t in tasks if t["persona_id"] == persona and t["kind"] == kind
                and vd.preference(persona, pref) in t["preferences"])


def test_the_page_round_trips_in_chromium(validated, tmp_path):
    if find_chromium() is None and not REQUIRED:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    page = validated["out"] / "annotation" / "batch-01.html"
    shown = validated["tasks"][:3]
    assert [t["kind"] for t in shown] == ["messages", "messages", "messages"]
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with Browser() as b:
        b.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        b.open(page)
        b.wait_for("window.cupidAnnotation && window.cupidAnnotation.ready")
        assert b.evaluate("document.querySelectorAll('section.task:not([hidden])').length") == 1
        b.type_into("#annotator", "ann 7")
        b.click("#next")  # nothing answered: the task stays
        assert "Answer every sub-preference" in b.evaluate("document.getElementById('status').textContent")
        expected = {}
        for k, t in enumerate(shown):
            labels = {}
            for e in t["entries"]:
                label = "not expressed" if (k + e["key"]) % 3 == 0 else "expressed"
                b.click(f'section[data-task="{t["id"]}"] .entry[data-entry="{e["key"]}"] input[value="{label}"]')
                labels[str(e["key"])] = label
            expected[t["id"]] = {"entries": labels}
            if k == 0:
                b.screenshot(ARTIFACTS / "annotation_task.png", full_page=True)
            b.click("#next")
        assert b.evaluate("document.querySelector('section.task:not([hidden])').dataset.task") == shown[-1]["id"]
        b.click("#save")
        deadline = time.monotonic() + 10
        while not list(downloads.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b.errors == []
    [saved] = list(downloads.glob("*.json"))
    assert saved.name == "annotations-batch-01-ann_7.json"
    data = json.loads(saved.read_text())
    assert (data["format"], data["page"], data["annotator"]) == (FORMAT, "batch-01", "ann 7")
    assert data["tasks"] == expected


def test_a_request_task_asks_for_realism(validated):
    if find_chromium() is None and not REQUIRED:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    number = next(k for k, t in enumerate(validated["tasks"]) if t["kind"] == "request")
    t = validated["tasks"][number]
    page = validated["out"] / "annotation" / f"batch-{number // 3 + 1:02d}.html"
    with Browser() as b:
        b.open(page)
        b.wait_for("window.cupidAnnotation && window.cupidAnnotation.ready")
        b.evaluate(f"document.querySelectorAll('section.task').forEach((s, i) => s.hidden = s.dataset.task !== '{t['id']}')")
        assert t["request"] in b.evaluate(f"document.querySelector('section[data-task=\"{t['id']}\"]').textContent")
        for e in t["entries"]:
            b.click(f'section[data-task="{t["id"]}"] .entry[data-entry="{e["key"]}"] input[value="not expressed"]')
        b.click(f'section[data-task="{t["id"]}"] .realism input[value="4"]')
        b.screenshot(ARTIFACTS / "annotation_request.png", full_page=True)
        answers = b.evaluate("window.cupidAnnotation.answers()")
    assert answers["tasks"][t["id"]]["realism"] == 4


def write(path, annotator, tasks: dict):
    path.write_text(json.dumps({"format": FORMAT, "page": "batch-01", "annotator": annotator, "tasks": tasks}))
    return path


def test_two_annotators_are_folded_in_with_alpha_and_the_instances_to_revise(validated, tmp_path, capsys):
    tasks = validated["tasks"]
    gap_a, good_a = task(tasks, "gap", "messages", "A"), task(tasks, "good", "messages", "A")
    request = task(tasks, "gap", "request", "A")
    # Four units: a = [1, 1, 0, 0], b = [1, 0, 0, 0]. Coincidences o00 = 4, o01 = o10 = 1,
    # o11 = 2 (n0 = 5, n1 = 3, n = 8): alpha = 1 - (n - 1) * 2 / (2 * n0 * n1) = 1 - 7/15.
    a = write(tmp_path / "a.json", "A", {
        gap_a["id"]: {"entries": {"1": "expressed", "2": "expressed"}},
        good_a["id"]: {"entries": {"1": "not expressed", "2": "not expressed"}},
        request["id"]: {"entries": {}, "realism": 4}})
    b = write(tmp_path / "b.json", "B", {
        gap_a["id"]: {"entries": {"1": "expressed", "2": "not expressed"}},
        good_a["id"]: {"entries": {"1": "not expressed", "2": "not expressed"}},
        request["id"]: {"entries": {}, "realism": 5}})
    out = validated["out"]
    assert main(["--data_dir", str(validated["root"] / "data"), "--output_dir", str(out), "--model",
                 validated["model"], "--tasks_per_page", "3", "--annotations", str(a), str(b)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    human = summary["human"]
    assert human["annotators"] == 2 and human["entries_annotated"] == 4
    assert human["alpha_entries"] == pytest.approx(8 / 15, abs=1e-4)
    # The validator: gap A2 not expressed, good A1 and A2 expressed; the humans (at least
    # one "expressed"): gap A2 expressed, good A1 and A2 not: it agrees on 1 of 4.
    assert human["llm_human_agreement_pct"] == 25.0
    assert human["realism"] == {"mean": 4.5, "sd": pytest.approx(0.7071, abs=1e-3), "n": 2}
    revise = {r["instance_id"] for r in human["to_revise"]}
    assert revise == {"good__consistent", "good__contrastive", "good__changing", "says__consistent",
                      "says__contrastive", "invents__contrastive"}
    verified = {p.stem for p in (out / "verified").glob("*.json")}
    assert verified == {"gap__consistent", "gap__contrastive", "gap__changing", "invents__consistent",
                        "invents__changing", "says__changing"}
    row = next(json.loads(line) for line in (out / "validation.jsonl").read_text().splitlines()
               if json.loads(line)["instance_id"] == "gap__changing")
    entry = next(e for e in row["entries"] if e["preference_role"] == "earlier" and e["index"] == 2)
    assert (entry["llm_verdict"], entry["verdict"], entry["human"]["labels"]) == (
        "not expressed", "expressed", {"A": "expressed", "B": "not expressed"})
    assert "alpha 0.5333" in capsys.readouterr().err


def test_a_bad_annotation_file_names_its_field(validated, tmp_path):
    bad = write(tmp_path / "bad.json", "A", {validated["tasks"][0]["id"]: {"entries": {"1": "maybe"}}})
    with pytest.raises(BadInput, match=r"bad.json: field 'tasks\.t\w+\.entries\.1'"):
        validate(validated["root"] / "data", output_dir=validated["out"], model=validated["model"],
                 tasks_per_page=3, annotations=[bad])
    unknown = write(tmp_path / "unknown.json", "A", {"t000": {"entries": {}}})
    with pytest.raises(BadInput, match="not a task of this validation"):
        validate(validated["root"] / "data", output_dir=validated["out"], model=validated["model"],
                 tasks_per_page=3, annotations=[unknown])


@pytest.mark.parametrize("answer, field, shape", [
    (["expressed"], r"'tasks\.t\w+'", "expected an object of 'entries'"),
    ({"entries": ["expressed"]}, r"'tasks\.t\w+\.entries'", "expected an object of entry number"),
])
def test_a_list_where_an_answer_or_its_entries_belong_is_named(validated, tmp_path, capsys, answer, field, shape):
    """Once an AttributeError traceback; now one line naming the file and field (exit 2)."""
    bad = write(tmp_path / "list.json", "L", {validated["tasks"][0]["id"]: answer})
    args = ["--data_dir", str(validated["root"] / "data"), "--output_dir", str(validated["out"]), "--model",
            validated["model"], "--tasks_per_page", "3", "--annotations", str(bad)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(rf"^error: .*list\.json: field {field}: {shape}", err, re.M)


def test_one_annotator_id_answers_a_task_once_across_files(validated, tmp_path):
    """The same id on the same task in two files (two people who typed one id, or one file
    sent twice with other labels) was folded into one annotator, the later file winning: it
    is refused, naming both files. One annotator's answers to other tasks in another file
    (another page) are theirs."""
    first, other = validated["tasks"][0], validated["tasks"][1]
    a = write(tmp_path / "a.json", "A", {first["id"]: {"entries": {"1": "expressed"}}})
    again = write(tmp_path / "again.json", "A", {first["id"]: {"entries": {"1": "not expressed"}}})
    b = write(tmp_path / "b.json", "B", {first["id"]: {"entries": {"1": "not expressed"}}})
    with pytest.raises(BadInput, match=rf"again\.json: field 'tasks\.{first['id']}': annotator 'A' answered "
                                       rf"this task in .*a\.json already"):
        validate(validated["root"] / "data", output_dir=validated["out"], model=validated["model"],
                 tasks_per_page=3, annotations=[a, b, again])
    page_two = write(tmp_path / "page2.json", "A", {other["id"]: {"entries": {"1": "expressed"}}})
    out = validate(validated["root"] / "data", output_dir=validated["out"], model=validated["model"],
                   tasks_per_page=3, annotations=[a, b, page_two])
    assert out.summary["human"]["annotators"] == 2 and out.summary["human"]["entries_annotated"] == 2


def test_four_tasks_per_series_the_request_asked_once_with_both_current_checklists(validated):
    """§3.2 / Appendix E: per persona, a task for each of p_current, p_contrast and the
    changed preference (the three instances share them), and one for the current request.
    The changing instance's current preference differs, so its request made a fifth task,
    which asked the same request's realism a second time."""
    tasks = validated["tasks"]
    for persona in vd.PERSONAS:
        mine = [t for t in tasks if t["persona_id"] == persona]
        assert [(t["kind"], t["role"]) for t in mine] == [("messages", "current"), ("messages", "current"),
                                                          ("messages", "contrasting"), ("request", "current request")]
        request = mine[-1]
        assert request["preferences"] == [vd.preference(persona, "A"), vd.preference(persona, "A'")]
        assert [(e["key"], e["index"]) for e in request["entries"]] == [(1, 1), (2, 2), (3, 3), (4, 1), (5, 2), (6, 3)]
        assert sorted(request["instances"]) == [f"{persona}__{k}" for k in ("changing", "consistent", "contrastive")]
    assert len(tasks) == 4 * len(vd.PERSONAS)
    page = (validated["out"] / "annotation" / "batch-01.html").read_text()
    assert page.count('class="realism box"') == sum(t["kind"] == "request" for t in validated["tasks"][:3])


def test_realism_is_counted_once_per_request_and_each_current_checklist_decides_its_instances(validated, tmp_path):
    says = task(validated["tasks"], "says", "request", "A")
    # The request states A's entry 1 (planted): consistent and contrastive are not challenging;
    # A''s entries, the changing instance's, are not stated, as both annotators agree.
    labels = {str(e["key"]): "expressed" if e["key"] == 1 else "not expressed" for e in says["entries"]}
    a = write(tmp_path / "a.json", "A", {says["id"]: {"entries": labels, "realism": 3}})
    b = write(tmp_path / "b.json", "B", {says["id"]: {"entries": labels, "realism": 5}})
    out = validate(validated["root"] / "data", output_dir=validated["out"], model=validated["model"],
                   tasks_per_page=3, annotations=[a, b])
    human = out.summary["human"]
    assert human["realism"] == {"mean": 4.0, "sd": pytest.approx(1.4142, abs=1e-3), "n": 2}
    assert human["entries_annotated"] == 6
    rows = {r["instance_id"]: r for r in out.rows}
    assert (rows["says__consistent"]["challenging"], rows["says__contrastive"]["challenging"],
            rows["says__changing"]["challenging"]) == (False, False, True)
    changing = [e for e in rows["says__changing"]["entries"] if e["preference_role"] == "current request"]
    assert [e["human"]["labels"] for e in changing] == [{"A": "not expressed", "B": "not expressed"}] * 3


def test_both_revision_rules_are_reported_each_named(validated, tmp_path, capsys):
    """§3.2 counts an entry expressed if at least one annotator marks it so; Appendix E revised
    any message where at least one annotator marked an entry not expressed. Where annotators
    split, only the second flags the instance."""
    good_b = task(validated["tasks"], "good", "messages", "B")
    split = write(tmp_path / "a.json", "A", {good_b["id"]: {"entries": {"1": "not expressed", "2": "expressed",
                                                                        "3": "expressed"}}})
    agree = write(tmp_path / "b.json", "B", {good_b["id"]: {"entries": {"1": "expressed", "2": "expressed",
                                                                        "3": "expressed"}}})
    args = ["--data_dir", str(validated["root"] / "data"), "--output_dir", str(validated["out"]), "--model",
            validated["model"], "--tasks_per_page", "3", "--annotations", str(split), str(agree)]
    assert main(args) == 0
    rules = json.loads((validated["out"] / "summary.json").read_text())["human"]["revision_rules"]
    section, appendix = rules["section_3_2"], rules["appendix_e"]
    assert section["rule"].startswith("§3.2: an entry is expressed if marked so by at least one annotator")
    assert appendix["rule"].startswith("Appendix E: revise where at least one annotator marked an entry not expressed")
    flagged = {r["instance_id"] for r in section["to_revise"]}
    assert flagged == vd.PLANTED
    assert {r["instance_id"] for r in appendix["to_revise"]} == flagged | {"good__contrastive"}
    good = next(r for r in appendix["to_revise"] if r["instance_id"] == "good__contrastive")
    assert good["reasons"] == ["not solvable: contrasting entry 1"]
    assert (section["instances"], appendix["instances"]) == (6, 7)
    assert appendix["pct"] == pytest.approx(100 * 7 / 12, abs=0.01)
    err = capsys.readouterr().err
    assert "instances to revise: 6 by §3.2's rule (expressed if marked by at least one annotator), 7 by Appendix " \
           "E's (revised where at least one annotator marked an entry not expressed)" in err


def test_fragments_not_found_verbatim_are_shown_to_the_annotators_marked_so(validated):
    """A fragment the validator gave that is not in the user's messages (invented, paraphrased,
    the assistant's words) never makes an entry expressed, but the annotators see it, marked,
    and may judge it; before, it was never shown."""
    invents_b = task(validated["tasks"], "invents", "messages", "B")
    third = next(e for e in invents_b["entries"] if e["index"] == 3)
    assert third["messages"] == [] and third["not_verbatim"] == ["I really want invents-b-hint-3 in everything"]
    invents_a = task(validated["tasks"], "invents", "messages", "A")
    a3 = next(e for e in invents_a["entries"] if e["index"] == 3)
    assert a3["messages"] == ["could you mind invents-a-hint-3"] and a3["not_verbatim"] == ["i kept invents-a-hint-3 in mind"]
    number = validated["tasks"].index(invents_b)
    page = (validated["out"] / "annotation" / f"batch-{number // 3 + 1:02d}.html").read_text()
    section = page.split(f'data-task="{invents_b["id"]}"')[1].split("</section>")[0]
    assert ("I really want invents-b-hint-3 in everything <span class='muted'>(not found verbatim in the user's "
            "messages)</span>") in section
    assert "no message was extracted" not in section.split('data-entry="3"')[1]
