"""The matcher's meta-evaluation (Appendix A.1): the labels file is read and checked, the
majority vote drops entries without one, Krippendorff's alpha and each scorer's agreement
are those worked out by hand; and end to end, on the fake server's runs
(tests/support/sample_results.py), an annotator clicks through the Figure 12 page in
headless Chromium, reloads it midway, downloads CSV and JSON, and the score step reads them
with two more annotators' files."""
from __future__ import annotations

import csv
import json
import os
from collections import Counter

import numpy as np
import pytest

from browser import Browser, find_chromium
from sample_results import build
from cupid.evaluation import match_agreement as command
from cupid.evaluation.report import agreement as A
from cupid.utils.io import atomic_write_json
from repo_paths import ARTIFACTS

krippendorff = pytest.importorskip("krippendorff", reason="the analysis extra: pip install -e .[analysis]")
pytest.importorskip("sklearn", reason="the analysis extra: pip install -e .[analysis]")

F, P, N = "Fully Covered", "Partially Covered", "Not Covered"
REQUIRED = os.environ.get("CUPID_REQUIRE_BROWSER") == "1"


def match_record(preference: str, entries: list[str], labels: list[str]) -> dict:
    return {"status": "done", "sent": {"values": {"preference": preference}},
            "output": {"results": [{"index": i, "entry": e, "label": label}
                                   for i, (e, label) in enumerate(zip(entries, labels), start=1)]}}


def write_run(root, model: str, scorer_labels: dict[str, tuple[list[str], list[str]]]) -> None:
    """One instance whose precision pair (pref-1, entries a b c) and recall pair (pref-2,
    entries x y) each scorer labelled as given."""
    evaluations = {scorer: {"steps": {"match_precision": match_record("pref-1", ["a", "b", "c"], precision),
                                      "match_recall": match_record("pref-2", ["x", "y"], recall)}}
                   for scorer, (precision, recall) in scorer_labels.items()}
    atomic_write_json(root / model / "run.json", {"model": model, "setting": "default"})
    atomic_write_json(root / model / "i1__consistent.json", {"instance_id": "i1__consistent", "persona_id": "i1",
                                                           "evaluations": evaluations})


def label_rows(pair: str, annotators_labels: dict[str, list[str]]) -> list[dict]:
    preference, checklist = {"p1": ("pref-1", ["a", "b", "c"]), "p2": ("pref-2", ["x", "y"])}[pair]
    return [{"pair_id": pair, "annotator": who, "preference": preference, "checklist": checklist, "labels": labels}
            for who, labels in annotators_labels.items()]


@pytest.fixture
def worked(tmp_path):
    """Three annotators: p1's entries a (F F P -> F), b (F P N -> none), c (N N N -> N); p2's
    x (P F N -> none) and y (F N P -> none): p2 has no majority at all and is dropped."""
    rows = label_rows("p1", {"u1": [F, F, N], "u2": [F, P, N], "u3": [P, N, N]}) + \
        label_rows("p2", {"u1": [P, F], "u2": [F, N], "u3": [N, P]})
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_run(tmp_path / "res", "m", {"judge": ([F, F, N], [P, P]), "judge+pm": ([P, N, F], [F, F])})
    return labels, tmp_path / "res", rows


def test_a_tie_is_no_majority():
    """More than half of the entry's annotators: 1-1 and 2-2 are ties (no label), 2-1 and 3-1
    are majorities; an entry labelled by one annotator alone has that label."""
    two = label_rows("p1", {"u1": [F, F, N], "u2": [P, F, F]})
    assert A.majority(two)["p1"]["majority"] == [None, F, None]
    four = label_rows("p2", {"u1": [F, F], "u2": [F, N], "u3": [N, F], "u4": [N, F]})
    assert A.majority(four)["p2"]["majority"] == [None, F]
    three = label_rows("p2", {"u1": [P, N], "u2": [P, N], "u3": [F, N]})
    assert A.majority(three)["p2"]["majority"] == [P, N]
    assert A.majority(label_rows("p1", {"u1": [N, P, F]}))["p1"]["majority"] == [N, P, F]
    votes = A.majority(four)["p2"]["votes"]
    assert votes[0] == Counter({F: 2, N: 2}) and votes[1] == Counter({F: 3, N: 1})


def test_majority_votes_drop_entries_without_one(worked):
    labels, results, rows = worked
    result = A.agreement(labels, results)
    assert (result["annotators"], result["pairs"], result["entries"]) == (3, 2, 5)
    assert result["entries_with_majority"] == 2 and result["pairs_without_majority"] == 1
    assert A.majority(rows)["p1"]["majority"] == [F, None, N]
    # Only a and c count: "judge" agrees on both (F, N); "judge+pm" on neither (P for F, F for N).
    judge, pm = result["scorers"]["judge"], result["scorers"]["judge+pm"]
    assert (judge["pairs"], judge["entries"], judge["accuracy"]) == (2, 2, 1.0)
    assert judge["accuracy_per_label"] == {N: 1.0, P: None, F: 1.0}
    assert judge["cohen_kappa"] == pytest.approx(1.0)
    assert pm["accuracy"] == 0.0
    # Rows: the majority (N, P, F); columns: the scorer.
    assert pm["confusion"]["rows_majority_columns_scorer"] == [[0, 0, 1], [0, 0, 0], [0, 1, 0]]
    # kappa = (p_o - p_e) / (1 - p_e): p_o = 0, p_e = (1/2 * 0 + 0 * 1/2 + 1/2 * 1/2) for N, P, F.
    assert pm["cohen_kappa"] == pytest.approx((0 - 0.25) / (1 - 0.25))


def test_alpha_is_krippendorffs_on_annotators_by_entries(worked):
    _, _, rows = worked
    # Annotators (rows) x entries (p1 a b c, p2 x y), ordinal codes N=0, P=1, F=2.
    by_hand = np.array([[2, 2, 0, 1, 2], [2, 1, 0, 2, 0], [1, 0, 0, 0, 1]], dtype=float)
    expected = krippendorff.alpha(reliability_data=by_hand, level_of_measurement="ordinal")
    assert A.annotator_alpha(rows) == pytest.approx(expected)
    assert A.annotator_alpha(rows) != pytest.approx(krippendorff.alpha(reliability_data=by_hand.T,
                                                                      level_of_measurement="ordinal"))
    agreeing = label_rows("p1", {"u1": [F, P, N], "u2": [F, P, N]})
    assert A.annotator_alpha(agreeing) == 1.0


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("annotator"), "row 2: field 'annotator'"),
    (lambda r: r.update(labels=[F, "Mostly"]), r"row 2: field 'labels': 'Mostly' is not one of"),
    (lambda r: r.update(labels=[F]), "row 2: 1 labels for 2 checklist entries"),
    (lambda r: r.update(checklist="[oops"), "row 2: field 'checklist' is not a JSON list"),
    (lambda r: r.update(annotator="u1"), "row 2: annotator 'u1' labelled pair p2 twice"),
    (lambda r: r.update(preference="other"), "row 2: pair p2 has another preference or checklist than in"),
])
def test_a_bad_row_is_named_with_its_file_row_and_field(tmp_path, change, message):
    rows = label_rows("p2", {"u1": [F, P], "u2": [P, P]})
    change(rows[1])
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(ValueError, match=message):
        A.read_labels(path)
    assert command.main(["score", str(tmp_path), "--labels", str(path)]) == 2


# ---------------------------------------------------------------------------------------
# End to end: the page in Chromium, then the score step
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return build(tmp_path_factory.mktemp("match"))


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None and not REQUIRED:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    with Browser(width=1300, height=900) as b:
        yield b


def annotate(browser: Browser, truth: dict[str, tuple[str, ...]], stop_after: int | None = None) -> int:
    """Rate each shown entry as ``truth`` (pair id -> labels) says, by clicking; returns the
    number of tasks done."""
    done, shown = 0, "section.task:not([hidden])"
    while browser.evaluate(f"!!document.querySelector('{shown}')") and done != stop_after:
        preference = browser.evaluate(f"document.querySelector('{shown} .preference .text').textContent")
        entries = browser.evaluate(f"[...document.querySelectorAll('{shown} .entries .text')]"
                                   ".map(e => e.textContent.replace(/^\\(\\d+\\) /, ''))")
        for k, label in enumerate(truth[A.pair_id(preference, entries)]):
            assert browser.evaluate("document.getElementById('next').disabled")  # until every entry is rated
            browser.click(f'{shown} .entry[data-entry="{k}"] input[value="{label}"]')
        browser.click("#next")
        done += 1
    return done


def test_an_annotator_clicks_through_the_page_and_downloads_the_labels(results, browser, tmp_path):
    page = tmp_path / "annotate.html"
    assert command.main(["page", str(results), "--output", str(page), "--n_pairs", "6"]) == 0
    scorers = A.scorer_pairs(results)
    evaluator = next(s for s in scorers if "+" not in s)
    matcher = next(s for s in scorers if "+" in s)
    truth = {key: pair.labels for key, pair in scorers[evaluator].items()}  # the annotator agrees with it
    embedded = page.read_text().split('id="pairs"', 1)[1]
    shown = json.loads(embedded[embedded.index(">") + 1:embedded.index("</script>")])
    assert len(shown) == 6 and len({p["pair_id"] for p in shown}) == 6

    downloads = browser.allow_downloads(tmp_path / "downloads")
    browser.open(page)
    browser.wait_for("window.cupidAnnotation && window.cupidAnnotation.ready")
    assert browser.evaluate("document.getElementById('next').disabled")  # no annotator id yet
    browser.type_into("#annotator", "ann 1")
    assert annotate(browser, truth, stop_after=3) == 3
    browser.screenshot(ARTIFACTS / "match_annotation_page.png")
    browser.open(page)  # a reload keeps the labels and the place
    browser.wait_for("window.cupidAnnotation && window.cupidAnnotation.ready")
    assert browser.evaluate("document.getElementById('task-no').textContent") == "4"
    assert annotate(browser, truth) == 3
    assert browser.evaluate("!document.getElementById('done').hidden")
    browser.click("#download-csv")
    browser.click("#download-json")
    as_csv = browser.wait_for_file(downloads / "match_labels_ann_1.csv")
    as_json = browser.wait_for_file(downloads / "match_labels_ann_1.json")
    assert browser.errors == []

    rows = A.read_labels(as_csv)
    assert rows == A.read_labels(as_json)
    assert [r["pair_id"] for r in rows] == [p["pair_id"] for p in shown]
    assert all(r["annotator"] == "ann 1" and tuple(r["labels"]) == truth[r["pair_id"]] for r in rows)
    assert list(csv.reader(as_csv.read_text().splitlines()))[0] == list(A.COLUMNS)

    # Two more annotators: one agrees with the first, one says "Not Covered" throughout.
    second = tmp_path / "ann2.jsonl"
    second.write_text("".join(json.dumps({**r, "annotator": "ann 2"}) + "\n" for r in rows))
    third = tmp_path / "ann3.json"
    third.write_text(json.dumps([{**r, "annotator": "ann 3", "labels": [N] * len(r["labels"])} for r in rows]))
    out = tmp_path / "agreement"
    assert command.main(["score", str(results), "--labels", str(as_csv), str(second), str(third),
                         "--output", str(out)]) == 0
    result = json.loads((out / "match_agreement.json").read_text())
    n_entries = sum(len(r["labels"]) for r in rows)
    assert (result["annotators"], result["pairs"], result["entries_with_majority"]) == (3, 6, n_entries)
    assert result["scorers"][evaluator]["accuracy"] == 1.0
    assert result["scorers"][evaluator]["alpha_with_majority"] == pytest.approx(1.0)
    # PrefMatcher's labels of the same pairs, counted by hand against the majority.
    pairs = [(truth[r["pair_id"]], scorers[matcher][r["pair_id"]].labels) for r in rows if r["pair_id"] in scorers[matcher]]
    confusion = Counter((h, m) for humans, machine in pairs for h, m in zip(humans, machine))
    got = result["scorers"][matcher]
    assert got["pairs"] == len(pairs) and got["entries"] == sum(confusion.values())
    assert got["accuracy"] == pytest.approx(sum(n for (h, m), n in confusion.items() if h == m) / got["entries"])
    assert got["confusion"]["rows_majority_columns_scorer"] == [[confusion[(h, m)] for m in A.LABELS] for h in A.LABELS]
    assert "Krippendorff's alpha among the annotators" in (out / "match_agreement.md").read_text()


AWKWARD = {  # texts a preference or an entry may hold, each once broke the page or the CSV
    "comment": ("keep HTML comments (<!-- like this -->) out", ["no </script> tags?", "plain & simple?"]),
    "lines": ("two\nlines, a\u2028separator and\u0085a next-line", ["=HYPERLINK(\"x\")?", "-5 degrees?"]),
    "quotes": ("'quoted' \"twice\", with a comma", ["@mention?", "+1?"]),
}


def test_texts_that_hold_markup_newlines_and_formulas_download_and_score_the_same(browser, tmp_path):
    """The page's embedded pairs are JSON whatever their text (a '<!--' once made both
    Download buttons throw), and the CSV and the JSON it saves read back to the same rows."""
    runs = tmp_path / "res"
    for n, (preference, checklist) in enumerate(AWKWARD.values()):
        atomic_write_json(runs / f"m{n}" / "run.json", {"model": f"m{n}", "setting": "default"})
        atomic_write_json(runs / f"m{n}" / "i1__consistent.json", {"instance_id": "i1__consistent", "persona_id": "i1",
                          "evaluations": {"judge": {"steps": {"match_precision": match_record(preference, checklist,
                                                                                             [F, N])}}}})
    page = tmp_path / "awkward.html"
    assert command.main(["page", str(runs), "--output", str(page)]) == 0
    downloads = browser.allow_downloads(tmp_path / "downloads")
    browser.open(page)
    browser.wait_for("window.cupidAnnotation && window.cupidAnnotation.ready")
    browser.type_into("#annotator", "ann awkward")
    truth = {A.pair_id(p, c): (F, P) for p, c in AWKWARD.values()}
    assert annotate(browser, truth) == 3
    browser.click("#download-csv")
    browser.click("#download-json")
    as_csv = browser.wait_for_file(downloads / "match_labels_ann_awkward.csv")
    as_json = browser.wait_for_file(downloads / "match_labels_ann_awkward.json")
    assert browser.errors == []
    rows = A.read_labels(as_json)
    assert {(r["preference"], tuple(r["checklist"])) for r in rows} == {(p, tuple(c)) for p, c in AWKWARD.values()}
    assert A.read_labels(as_csv) == rows
    assert A.agreement([as_csv], runs) == {**A.agreement([as_json], runs), "labels_files": [str(as_csv)]}


@pytest.mark.parametrize("bom", [False, True])
def test_a_csv_is_read_as_a_file_is_so_csv_and_json_of_the_same_labels_score_the_same(worked, tmp_path, bom):
    """Line breaks inside a quoted cell (CRLF, LF, a lone CR, U+2028, U+0085) belong to the
    text, and a spreadsheet's byte-order mark is no part of the first column's name."""
    _, results, rows = worked
    rows = [{**r, "checklist": [f"{e}\r\nline\u2028sep\u0085next\rcr" if e in ("a", "x") else e for e in r["checklist"]]}
            for r in rows]
    write_run(results, "m", {"judge": ([F, F, N], [P, P])})
    as_json = tmp_path / "labels.json"
    as_json.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    as_jsonl = tmp_path / "labels.jsonl"
    as_jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    as_csv = tmp_path / "labels.csv"
    with as_csv.open("w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=A.COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows({**r, "checklist": json.dumps(r["checklist"], ensure_ascii=False),
                          "labels": json.dumps(r["labels"])} for r in rows)
    assert A.read_labels(as_csv) == A.read_labels(as_json) == A.read_labels(as_jsonl)
    assert A.read_labels(as_csv)[0]["checklist"][0] == "a\r\nline\u2028sep\u0085next\rcr"
    from_json, from_csv = A.agreement(as_json, results), A.agreement(as_csv, results)
    assert (from_csv["pairs"], from_csv["entries"]) == (from_json["pairs"], from_json["entries"]) == (2, 5)
    assert from_csv["scorers"] == from_json["scorers"]


@pytest.mark.parametrize("files, why", [
    ({"one.json": label_rows("p1", {"u1": [F, P, N]}) + label_rows("p2", {"u1": [F, N]})}, "one annotator"),
    ({"a.json": label_rows("p1", {"u1": [F, P, N]}), "b.json": label_rows("p2", {"u2": [F, N]})},
     "no entry was labelled by two annotators"),
])
def test_alpha_among_annotators_is_undefined_and_said_so_where_no_two_rated_one_entry(tmp_path, files, why):
    """One annotator, or two whose files share no pair: the majority and each scorer's
    agreement are still computed; alpha among the annotators has no value, and the reason is
    written where the value would be."""
    write_run(tmp_path / "res", "m", {"judge": ([F, F, N], [P, P])})
    paths = []
    for name, rows in files.items():
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(rows))
    out = tmp_path / "out"
    assert command.main(["score", str(tmp_path / "res"), "--labels", *map(str, paths), "--output", str(out)]) == 0
    result = json.loads((out / "match_agreement.json").read_text())
    assert result["annotator_alpha"] is None and why in result["annotator_alpha_undefined"]
    assert result["scorers"]["judge"]["entries"] == 5
    assert f"ordinal —, nominal — ({why}" in (out / "match_agreement.md").read_text()


def test_alpha_is_given_at_both_levels_and_its_level_is_stated_as_our_choice(worked, tmp_path):
    """The paper states no level of measurement: ordinal is ours, nominal stands beside it."""
    labels, results, rows = worked
    by_hand = np.array([[2, 2, 0, 1, 2], [2, 1, 0, 2, 0], [1, 0, 0, 0, 1]], dtype=float)
    result = A.agreement(labels, results)
    assert result["annotator_alpha"] == pytest.approx(krippendorff.alpha(reliability_data=by_hand,
                                                                          level_of_measurement="ordinal"))
    assert result["annotator_alpha_nominal"] == pytest.approx(krippendorff.alpha(reliability_data=by_hand,
                                                                                  level_of_measurement="nominal"))
    assert result["annotator_alpha_nominal"] != pytest.approx(result["annotator_alpha"])
    # judge+pm against the majority (F, N) on a and c: it said (P, F).
    codes = np.array([[2, 0], [1, 2]], dtype=float)
    pm = result["scorers"]["judge+pm"]
    assert pm["alpha_with_majority"] == pytest.approx(krippendorff.alpha(reliability_data=codes,
                                                                         level_of_measurement="ordinal"))
    assert pm["alpha_with_majority_nominal"] == pytest.approx(krippendorff.alpha(reliability_data=codes,
                                                                                 level_of_measurement="nominal"))
    text = A.markdown(result)
    assert "level of measurement is our choice, the paper states none" in text
    assert "| α with majority (ordinal) | α (nominal) |" in text
