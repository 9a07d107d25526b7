"""The annotation's tasks, files and fold (synthesis/annotation.py) on hand-made validation
rows, in process (tests/synthesis/test_annotation.py runs the same through cupid-validate and a
browser): the tasks asked, an entry expressed when one annotator marks it so, a human "not
expressed" never overriding a failed extraction, alpha, realism, agreement and both revision
rules worked by hand."""
from __future__ import annotations

import json

import pytest

from cupid.synthesis.validation import annotation as A
from cupid.synthesis.validation.plan import CONTRASTING, CURRENT, EARLIER, EXPRESSED, FAILED, NOT_EXPRESSED, REQUEST
from cupid.utils.errors import BadInput

E, N = EXPRESSED, NOT_EXPRESSED


def entry(role, preference, index, verdict, fragments=(), dropped=(), failed=None):
    out = {"preference_role": role, "preference": preference, "index": index, "entry": f"{preference} entry {index}?",
           "verdict": verdict, "fragments": [{"session": 1, "text": t} for t in fragments],
           "dropped_fragments": [{"session": 1, "text": t} for t in dropped], "rating": None}
    if failed:
        out["failed_sessions"] = failed
    return out


def row(instance_id, kind, entries, persona="p1"):
    return {"instance_id": instance_id, "persona_id": persona, "instance_type": kind, "solvable": None,
            "challenging": None, "verified": False, "entries": entries, "notes": []}


@pytest.fixture
def rows():
    """p1: consistent and contrastive share current preference "Short." and the request
    task; contrastive also checks "Long." (contrasting). Entry 1 of "Short." failed for the
    validator; entry 2 it found expressed; "Long." entry 1 it found not expressed."""
    short = [entry(CURRENT, "Short.", 1, FAILED, failed=[2], dropped=["said briefly"]),
             entry(CURRENT, "Short.", 2, E, fragments=["keep it brief"])]
    request = [entry(REQUEST, "Short.", 1, N), entry(REQUEST, "Short.", 2, N)]
    return [row("p1-consistent", "consistent", [*short, *request]),
            row("p1-contrastive", "contrastive", [*[dict(e) for e in short],
                                                  entry(CONTRASTING, "Long. ", 1, N, fragments=[]),
                                                  *[dict(e) for e in request]]),
            # its checklist could not be had: an entry without an index, never asked
            row("p1-changing", "changing", [{**entry(CURRENT, "Other.", 1, FAILED), "index": None, "entry": None}])]


REQUESTS = {"p1-consistent": "Write the memo.", "p1-contrastive": "Write the memo.", "p1-changing": "Plan a trip."}


def by_kind(tasks):
    return {(t["kind"], tuple(t["preferences"])): t for t in tasks}


def test_the_tasks_one_per_preference_and_one_per_request(rows):
    tasks = A.annotation_tasks(rows, REQUESTS)
    found = by_kind(tasks)
    assert set(found) == {("messages", ("Short.",)), ("messages", ("Long.",)), ("request", ("Short.",))}
    short, long_, request = found[("messages", ("Short.",))], found[("messages", ("Long.",))], found[("request", ("Short.",))]
    assert [t["id"] for t in tasks] == [short["id"], long_["id"], request["id"]]   # current, contrasting, request
    assert short["instances"] == ["p1-consistent", "p1-contrastive"] and long_["instances"] == ["p1-contrastive"]
    assert short["role"] == CURRENT and long_["role"] == CONTRASTING and request["role"] == REQUEST
    assert request["request"] == "Write the memo." and short["request"] is None
    assert [(e["key"], e["index"]) for e in short["entries"]] == [(1, 1), (2, 2)]
    assert short["entries"][0]["messages"] == [] and short["entries"][0]["not_verbatim"] == ["said briefly"]
    assert short["entries"][1]["messages"] == ["keep it brief"] and short["entries"][1]["not_verbatim"] == []
    assert short["id"] == A.task_key("p1", "messages", " Short. ") and short["id"].startswith("t")
    assert len(short["id"]) == 11
    assert A.units_of(tasks)[("p1-contrastive", "messages", "Short.", 2)] == (short["id"], 2)
    assert A.units_of(tasks)[("p1-consistent", "request", "Short.", 1)] == (request["id"], 1)


def annotations(tasks, by_annotator):
    """{annotator: {(kind, preference, entry key): label, ("realism", request task): n}}."""
    found = by_kind(tasks)
    out = []
    for who, marks in by_annotator.items():
        labels, realism = {}, {}
        for (kind, preference, key), label in marks.items():
            if kind == "realism":
                realism[found[("request", (preference,))]["id"]] = label
            else:
                labels[(found[(kind, (preference,))]["id"], key)] = label
        out.append({"annotator": who, "file": f"{who}.json", "labels": labels, "realism": realism})
    return out


def test_one_expressed_mark_decides_and_a_not_expressed_over_a_failed_extraction_stays_failed(rows):
    tasks = A.annotation_tasks(rows, REQUESTS)
    marks = {"ann1": {("messages", "Short.", 1): N, ("messages", "Short.", 2): N, ("messages", "Long.", 1): E,
                      ("request", "Short.", 1): N, ("request", "Short.", 2): N, ("realism", "Short.", 0): 4},
             "ann2": {("messages", "Short.", 1): N, ("messages", "Short.", 2): E, ("messages", "Long.", 1): N,
                      ("request", "Short.", 1): N, ("request", "Short.", 2): E, ("realism", "Short.", 0): 2}}
    human = A.fold(rows, tasks, annotations(tasks, marks))
    consistent, contrastive, changing = rows
    first = consistent["entries"][0]
    # both annotators say "not expressed", but the validator's extraction of a session failed:
    # the entry stays failed (the session nobody saw may express it), the instance unknown
    assert first["verdict"] == FAILED and first["llm_verdict"] == FAILED
    assert first["human"] == {"labels": {"ann1": N, "ann2": N}, "verdict": N}
    assert consistent["entries"][1]["verdict"] == E                      # one of two marked it: expressed
    assert consistent["entries"][3]["verdict"] == E                      # request entry 2 stated (ann2)
    assert (consistent["solvable"], consistent["challenging"], consistent["verified"]) == (None, False, False)
    assert contrastive["entries"][2]["verdict"] == E and contrastive["entries"][2]["llm_verdict"] == N
    assert (contrastive["solvable"], contrastive["challenging"]) == (None, False)
    assert "human" not in changing["entries"][0]
    # validator vs humans, on the entries the validator decided: 3 per instance x 2 instances minus
    # the failed ones: consistent (E/E, N/N, N/E), contrastive (E/E, N/E, N/N, N/E)
    assert human["llm_human_pairs"] == 7
    assert human["llm_human_agreement_pct"] == round(100 * 4 / 7, 2)
    assert human["annotators"] == 2 and human["entries_annotated"] == 5
    assert human["realism"] == {"mean": 3.0, "sd": round(2 ** 0.5, 3), "n": 2}
    assert human["files"] == ["ann1.json", "ann2.json"]
    # nominal alpha of ann1 (0 0 1 0 0) and ann2 (0 1 0 0 1) over five units, by hand:
    # D_o = 6/10 of the pairs disagree... computed with krippendorff itself on the same matrix
    import krippendorff
    expected = krippendorff.alpha(reliability_data=[[0, 0, 1, 0, 0], [0, 1, 0, 0, 1]], level_of_measurement="nominal")
    assert human["alpha_entries"] == round(float(expected), 4) and human["alpha_entries_note"] is None


def test_both_revision_rules_are_worked_out_each_named(rows):
    tasks = A.annotation_tasks(rows, REQUESTS)
    marks = {"ann1": {("messages", "Short.", 2): N, ("messages", "Long.", 1): N, ("request", "Short.", 1): N},
             "ann2": {("messages", "Short.", 2): E, ("messages", "Long.", 1): N, ("request", "Short.", 1): N}}
    human = A.fold(rows, tasks, annotations(tasks, marks))
    rules = human["revision_rules"]
    assert (rows[1]["solvable"], rows[1]["challenging"], rows[1]["verified"]) == (False, True, False)
    assert set(rules) == {"section_3_2", "appendix_e"}
    assert rules["section_3_2"]["rule"] == A.REVISION_RULES["section_3_2"]
    # §3.2: the contrastive instance is not solvable ("Long." entry 1: both say not expressed)
    assert rules["section_3_2"]["to_revise"] == [{"instance_id": "p1-contrastive",
                                                 "reasons": ["not solvable: contrasting entry 1"]}]
    assert human["to_revise"] == rules["section_3_2"]["to_revise"]
    assert rules["section_3_2"]["instances"] == 1 and rules["section_3_2"]["pct"] == round(100 / 3, 2)
    # Appendix E: any annotator's "not expressed" (ann1 on "Short." entry 2) flags both instances
    assert rules["appendix_e"]["to_revise"] == [
        {"instance_id": "p1-consistent", "reasons": ["not solvable: current entry 2"]},
        {"instance_id": "p1-contrastive", "reasons": ["not solvable: contrasting entry 1", "not solvable: current entry 2"]}]
    assert rules["appendix_e"]["instances"] == 2


def test_a_human_expressed_over_a_failed_extraction_decides_it(rows):
    tasks = A.annotation_tasks(rows, REQUESTS)
    marks = {"ann1": {("messages", "Short.", 1): E, ("messages", "Long.", 1): E}}
    human = A.fold(rows, tasks, annotations(tasks, marks))
    assert rows[0]["entries"][0]["verdict"] == E
    assert (rows[0]["solvable"], rows[0]["challenging"], rows[0]["verified"]) == (True, True, True)
    assert rows[1]["verified"] is True
    assert human["alpha_entries"] is None and human["alpha_entries_note"] == "no unit rated by two coders"
    assert human["llm_human_pairs"] == 1 and human["llm_human_agreement_pct"] == 0.0
    assert human["realism"] == {"mean": None, "sd": None, "n": 0}
    one = A.fold(rows, tasks, [{"annotator": "x", "file": "x", "labels": {}, "realism": {"tR": 4}}])
    assert one["realism"] == {"mean": 4.0, "sd": None, "n": 1} and one["llm_human_agreement_pct"] is None
    assert one["llm_human_pairs"] == 0 and one["alpha_llm_human"] is None
    assert human["revision_rules"]["section_3_2"]["instances"] == 0


def write(path, annotator, answers, fmt=A.FORMAT):
    path.write_text(json.dumps({"format": fmt, "annotator": annotator, "tasks": answers}), encoding="utf-8")
    return path


def test_annotation_files_are_read_and_bad_ones_named(rows, tmp_path):
    tasks = {t["id"]: t for t in A.annotation_tasks(rows, REQUESTS)}
    found = by_kind(tasks.values())
    short, request = found[("messages", ("Short.",))]["id"], found[("request", ("Short.",))]["id"]
    good = write(tmp_path / "a.json", " ann1 ", {short: {"entries": {"1": N, "2": E}}, request: {"entries": {"1": N},
                                                                                              "realism": 5}})
    blank = write(tmp_path / "b.json", "", {short: None})
    out = A.read_annotations([good, blank], tasks)
    assert out[0] == {"annotator": "ann1", "file": str(good), "labels": {(short, 1): N, (short, 2): E, (request, 1): N},
                      "realism": {request: 5}}
    assert out[1]["annotator"] == "b" and out[1]["labels"] == {}
    cases = [
        ({"tX": {}}, "field 'tasks.tX': not a task"),
        ({short: ["x"]}, f"field 'tasks.{short}': expected an object"),
        ({short: {"entries": [N]}}, f"field 'tasks.{short}.entries': expected an object"),
        ({short: {"entries": {"1": "maybe"}}}, f"field 'tasks.{short}.entries.1': 'maybe' is not"),
        ({short: {"entries": {"9": N}}}, f"field 'tasks.{short}.entries.9'"),
        ({short: {"realism": 3}}, f"field 'tasks.{short}.realism': 3 is not a rating"),
        ({request: {"realism": 6}}, f"field 'tasks.{request}.realism': 6"),
        ({request: {"realism": True}}, f"field 'tasks.{request}.realism': True"),
    ]
    for answers, message in cases:
        with pytest.raises(BadInput, match=message.replace(".", r"\.").replace("'", "'")):
            A.read_annotations([write(tmp_path / "bad.json", "x", answers)], tasks)
    with pytest.raises(BadInput, match="not an annotation file"):
        A.read_annotations([write(tmp_path / "f.json", "x", {}, fmt="other/1")], tasks)
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(BadInput, match="broken.json: not a readable JSON file"):
        A.read_annotations([tmp_path / "broken.json"], tasks)
    # one annotator id, one task, in two files: refused with both files named
    again = write(tmp_path / "c.json", "ann1", {short: {"entries": {"1": E}}})
    with pytest.raises(BadInput, match=f"annotator 'ann1' answered this task in {good} already"):
        A.read_annotations([good, again], tasks)


def test_pages_hold_every_task_and_its_fragments_marked(rows, tmp_path):
    tasks = A.annotation_tasks(rows, REQUESTS)
    paths = A.write_pages(tmp_path, tasks, per_page=2)
    assert [p.name for p in paths] == ["batch-01.html", "batch-02.html"]
    first, second = (p.read_text(encoding="utf-8") for p in paths)
    assert "Task 1 of 2" in first and "Task 2 of 2" in first and "Task 1 of 1" in second
    assert f"said briefly <span class='muted'>({A.NOT_VERBATIM})</span>" in first
    assert "<li class='text'>keep it brief</li>" in first
    assert "(no message was extracted for this sub-preference)" in first     # "Long." entry 1
    assert "How realistic is it" in second and "How realistic is it" not in first
    assert "<h3>User's Request</h3>" in second and "Write the memo." in second
    assert json.loads((tmp_path / "tasks.json").read_text(encoding="utf-8")) == tasks


def test_alpha_at_its_level_and_undefined_where_no_unit_has_two_coders():
    import krippendorff

    ratings = [[1, 2, 5, None, 4], [2, 2, 4, 3, None], [1, 3, 5, 3, 4]]
    ordinal = krippendorff.alpha(reliability_data=[[float("nan") if v is None else v for v in r] for r in ratings],
                                 level_of_measurement="ordinal")
    interval = krippendorff.alpha(reliability_data=[[float("nan") if v is None else v for v in r] for r in ratings],
                                  level_of_measurement="interval")
    assert round(ordinal, 4) != round(interval, 4)
    assert A._alpha(ratings, "ordinal") == (round(float(ordinal), 4), None)
    assert A._alpha([[1, None], [None, 0]], "nominal") == (None, "no unit rated by two coders")
    assert A._alpha([[1, 0, 1]], "nominal") == (None, "no unit rated by two coders")
    assert A._alpha([], "nominal") == (None, "no unit rated by two coders")
    # the only unit two coders rated, rated alike: no disagreement to expect, alpha undefined (not NaN,
    # which summary.json could not hold as JSON)
    assert A._alpha([[1, None], [1, 0]], "nominal") == (None, "every value rated by two coders is the same: "
                                                              "no disagreement to expect")
    value, note = A._alpha([[1, 1], [1, 1]], "nominal")       # no variation: krippendorff refuses
    assert value is None and isinstance(note, str) and note


def test_alpha_without_the_krippendorff_package_says_how_to_install_it(monkeypatch):
    import sys

    from cupid.utils.errors import SetupError

    monkeypatch.setitem(sys.modules, "krippendorff", None)
    with pytest.raises(SetupError) as info:
        A._alpha([[1, 0], [0, 1]], "nominal")
    assert str(info.value) == ("Krippendorff's alpha needs the krippendorff package: pip install "
                               "'cupid-harness[analysis]'")


def test_the_realism_alpha_is_ordinal_and_a_request_stated_is_not_challenging(rows):
    import krippendorff

    tasks = A.annotation_tasks(rows, REQUESTS)
    request_task = by_kind(tasks)[("request", ("Short.",))]["id"]
    other = {"id": "tOTHER", "kind": "request"}
    annotations = [{"annotator": "a1", "file": "a1", "labels": {(request_task, 1): E},
                    "realism": {request_task: 2, "tOTHER": 5, "tTHIRD": 3}},
                   {"annotator": "a2", "file": "a2", "labels": {(request_task, 1): E},
                    "realism": {request_task: 1, "tOTHER": 4, "tTHIRD": 5}}]
    assert other["kind"] == "request"
    human = A.fold(rows, tasks, annotations)
    expected = krippendorff.alpha(reliability_data=[[2, 5, 3], [1, 4, 5]], level_of_measurement="ordinal")
    assert human["alpha_realism"] == round(float(expected), 4)
    assert human["realism"]["n"] == 6 and human["realism"]["mean"] == round(20 / 6, 3)
    mean = 20 / 6
    sd = (sum((r - mean) ** 2 for r in (2, 5, 3, 1, 4, 5)) / 5) ** 0.5
    assert human["realism"]["sd"] == round(sd, 3)
    # the validator's verdicts of the two request entries asked: "not expressed", the humans' "expressed"
    assert human["llm_human_pairs"] == 2 and human["llm_human_agreement_pct"] == 0.0
    pairs = krippendorff.alpha(reliability_data=[[0, 0], [1, 1]], level_of_measurement="nominal")
    assert human["alpha_llm_human"] == round(float(pairs), 4) == -0.5
    assert human["revision_rules"]["section_3_2"]["to_revise"] == [
        {"instance_id": "p1-consistent", "reasons": ["not challenging: current request entry 1"]},
        {"instance_id": "p1-contrastive", "reasons": ["not challenging: current request entry 1",
                                                      "not solvable: contrasting entry 1"]}]


def test_tasks_follow_the_series_order_whatever_the_rows_order():
    """Rows in any order: a task's instances are listed consistent, contrastive, changing; its
    role is the first of current, contrasting, earlier that asks it; an entry whose checklist
    could not be had is skipped, not the rest of its row; two requests with one preference are
    two tasks."""
    changing = row("p1-changing", "changing", [
        {**entry(CURRENT, "New.", 1, FAILED), "index": None, "entry": None},
        entry(EARLIER, "Short.", 1, E, fragments=["brief"]), entry(CURRENT, "New.", 1, E, fragments=["new"]),
        entry(REQUEST, "Short.", 1, N)])
    consistent = row("p1-consistent", "consistent", [entry(CURRENT, "Short.", 1, E, fragments=["brief"]),
                                                     entry(REQUEST, "Short.", 1, N)])
    stray = row("p1-other", "unknown-kind", [entry(CURRENT, "Short.", 1, E)])
    tasks = A.annotation_tasks([stray, changing, consistent], {"p1-changing": "Plan a trip.",
                                                              "p1-consistent": "Write the memo.", "p1-other": "x"})
    short = next(t for t in tasks if t["kind"] == "messages" and t["preferences"] == ["Short."])
    assert short["instances"] == ["p1-consistent", "p1-changing", "p1-other"] and short["role"] == CURRENT
    new = next(t for t in tasks if t["preferences"] == ["New."])
    assert new["instances"] == ["p1-changing"] and new["entries"][0]["messages"] == ["new"]
    requests = sorted((t["request"], t["instances"]) for t in tasks if t["kind"] == "request")
    assert requests == [("Plan a trip.", ["p1-changing"]), ("Write the memo.", ["p1-consistent"])]
    earlier_first = A.annotation_tasks([row("p2-changing", "changing", [entry(EARLIER, "Old.", 1, E)]),
                                        row("p2-consistent", "consistent", [entry(CURRENT, "Old.", 1, E)])],
                                       {"p2-changing": "r", "p2-consistent": "r"})
    assert [t["role"] for t in earlier_first] == [CURRENT]
    contrast_then_current = A.annotation_tasks([row("p3-a", "contrastive", [entry(CONTRASTING, "X.", 1, E)]),
                                                row("p3-b", "contrastive", [entry(CURRENT, "X.", 1, E)])],
                                               {"p3-a": "r", "p3-b": "r"})
    assert [t["role"] for t in contrast_then_current] == [CURRENT]


def test_a_page_asks_each_entry_and_the_requests_realism_by_name(rows):
    import re

    tasks = A.annotation_tasks(rows, REQUESTS)
    found = by_kind(tasks)
    messages, request = found[("messages", ("Short.",))], found[("request", ("Short.",))]
    html = A.render_page("batch-07", [messages, request])
    assert "None" not in html
    radios = [(n, v, label.replace("&#x27;", "'")) for n, v, label in
              re.findall(r'<input type="radio" name="([^"]+)" value="([^"]+)"> ([^<]+)</label>', html)]
    mid, rid = messages["id"], request["id"]
    assert radios == [
        (f"{mid}-1", E, A.YES["messages"]), (f"{mid}-1", N, A.NO["messages"]),
        (f"{mid}-2", E, A.YES["messages"]), (f"{mid}-2", N, A.NO["messages"]),
        (f"{rid}-1", E, A.YES["request"]), (f"{rid}-1", N, A.NO["request"]),
        (f"{rid}-2", E, A.YES["request"]), (f"{rid}-2", N, A.NO["request"]),
        *[(f"{rid}-realism", str(k), str(k)) for k in range(1, 6)]]
    for kind in ("messages", "request"):
        title, intro = A.INTRO[kind]
        assert f"<p><b>{title}</b></p><p class=\"muted\">{intro.replace(chr(39), '&#x27;')}</p>" in html
    assert "<h3>Sub-Preference 1</h3><p>Short. entry 1?</p>" in html
    assert '<section class="task box" data-task="' + mid + '" hidden><h2>Task 1 of 2</h2>' in html
    assert html.count("How realistic is it for a user to ask this request") == 1
    assert "<h3>User's Request</h3><p class=\"text\">Write the memo.</p></div><div class=\"entry\"" in html
    assert "</div></div></section>" in html or "</fieldset></div></section>" in html
    assert "CUPID validation · batch-07" in html and '"file_prefix":"annotations-batch-07-"' in html
    assert f'"format":"{A.FORMAT}"' in html


def test_reading_files_details(rows, tmp_path):
    tasks = {t["id"]: t for t in A.annotation_tasks(rows, REQUESTS)}
    found = by_kind(tasks.values())
    short, long_, request = (found[k]["id"] for k in (("messages", ("Short.",)), ("messages", ("Long.",)),
                                                      ("request", ("Short.",))))
    # a BOM (a text editor's "UTF-8 with BOM") is no part of the JSON; an unanswered task is skipped, not the rest
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"format": A.FORMAT, "annotator": "x", "tasks": {
        short: None, long_: {"entries": {"1": E}}, request: {"realism": 1}}}).encode("utf-8"))
    other = write(tmp_path / "other.json", "y", {long_: {"entries": {"1": N}}})   # another annotator, same task
    first, second = A.read_annotations([bom, other], tasks)
    assert first["labels"] == {(long_, 1): E} and first["realism"] == {request: 1}
    assert second["labels"] == {(long_, 1): N}
    with pytest.raises(BadInput) as info:
        A.read_annotations([write(tmp_path / "l.json", "x", {short: ["x"]})], tasks)
    assert str(info.value).endswith("expected an object of 'entries' (and 'realism'), got list")
    with pytest.raises(BadInput) as info:
        A.read_annotations([write(tmp_path / "e.json", "x", {short: {"entries": "all"}})], tasks)
    assert str(info.value).endswith("expected an object of entry number -> label, got str")
    with pytest.raises(BadInput) as info:
        A.read_annotations([write(tmp_path / "m.json", "x", {short: {"entries": {"1": "yes"}}})], tasks)
    assert str(info.value).endswith(f"'yes' is not {E} or {N} of an entry of the task")
    with pytest.raises(BadInput, match="realism': 0 is not a rating 1-5"):
        A.read_annotations([write(tmp_path / "r.json", "x", {request: {"realism": 0}})], tasks)


def test_folding_again_keeps_the_validators_verdict_and_skips_entries_never_asked(rows):
    rows[0]["entries"].insert(0, {**entry(CURRENT, "Gone.", 1, FAILED), "index": None, "entry": None})
    tasks = A.annotation_tasks(rows, REQUESTS)
    marks = annotations(tasks, {"a": {("messages", "Short.", 2): N}})
    A.fold(rows, tasks, marks)
    entry2 = rows[0]["entries"][2]
    assert entry2["verdict"] == N and entry2["llm_verdict"] == E and entry2["human"]["verdict"] == N
    A.fold(rows, tasks, annotations(tasks, {"a": {("messages", "Short.", 2): E}}))
    assert entry2["verdict"] == E and entry2["llm_verdict"] == E     # still the validator's, not the first fold's
    empty = A.fold([], [], [])
    assert empty["revision_rules"]["section_3_2"]["pct"] is None and empty["annotators"] == 0


def test_the_page_carries_its_style_and_its_save_button(rows):
    html = A.render_page("b1", A.annotation_tasks(rows, REQUESTS))
    assert A.STYLE in html
    assert '<button type="button" id="save" data-download="answers">Save answers (JSON)</button>' in html
    assert '"page":"b1"' in html and '"entry":"sub-preference"' in html
    assert '<span class="brand">CUPID validation · b1</span>' in html
    assert "<title>CUPID validation · b1</title>" in html


def test_written_pages_and_tasks_file_as_they_are_read(rows, tmp_path):
    rows[0]["entries"][1]["fragments"].append({"session": 2, "text": "short, café"})
    rows[0]["entries"][0]["dropped_fragments"].append({"session": 2, "text": "tersely"})
    tasks = A.annotation_tasks(rows, REQUESTS)
    A.write_pages(tmp_path, tasks, per_page=16)
    page = (tmp_path / "batch-01.html").read_text(encoding="utf-8")
    assert "CUPID validation · batch-01" in page and '"page":"batch-01"' in page
    assert "<li class='text'>keep it brief</li><li class='text'>short, café</li>" in page
    assert (f"said briefly <span class='muted'>({A.NOT_VERBATIM})</span></li><li class='text not-verbatim'>tersely "
            in page)
    request = next(t for t in tasks if t["kind"] == "request")
    section = page[page.index(f'data-task="{request["id"]}"'):]
    section = section[:section.index("</section>")]
    assert "<div></div></div>" in section and "User's Messages" not in section
    messages = next(t for t in tasks if t["kind"] == "messages" and t["preferences"] == ["Short."])
    section = page[page.index(f'data-task="{messages["id"]}"'):]
    assert section[:section.index("</section>")].endswith("</ul></div></div>")
    text = (tmp_path / "tasks.json").read_text(encoding="utf-8")
    assert text.startswith('[\n {\n  "id": ') and "short, café" in text


def test_only_a_request_task_shows_the_request(rows):
    tasks = A.annotation_tasks(rows, REQUESTS)
    messages = next(t for t in tasks if t["kind"] == "messages")
    html = A._task_html(messages, 1, 1)
    assert "User's Request" not in html and "<p class=\"text\">" not in html
