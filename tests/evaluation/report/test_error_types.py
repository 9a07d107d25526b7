"""Table 2 and Figure 6 from runs made through the loopback server
(tests/support/error_type_results.py): ``cupid-report --error_types`` draws the low-F1
inferences with its seed, the evaluator classifies them at temperature 0 (scripted answers,
malformed ones and a server that fails among them), a failed classification is recorded,
counted and asked again by a rerun, --batch goes through the batch API, and the report
shows Table 2 (md, csv, export, report.html) and Figure 6."""
from __future__ import annotations

import csv
import json
import random
import shutil

import pytest

from cupid import config
from cupid.evaluation.report import command
from cupid.evaluation.report import statistics as S
from cupid.evaluation.report.analysis import Analysis
from cupid.evaluation.report.format import fmt_ci, fmt_pct, fmt_score
from cupid.evaluation.report.published import lookup
from cupid.utils.io import read_json
from error_type_results import (CLASSIFIER, DEEPSEEK, ELIGIBLE, EVALUATOR, EXPECTED_COUNTS, FAILED, Responder,
                                build, provider_env)
from fake_llm_server import FakeLLMServer
from tests.evaluation.report.test_report_html import browser, needs_chromium, open_report, shot  # noqa: F401  (fixtures)

DEEPSEEK_DIR, MODEL_B_DIR = "deepseek-ai_DeepSeek-R1-4ecad6d3", "model-b"
FAILED_KEYS = (("p2", "contrastive"), ("p3", "consistent"))
N_BOOTSTRAP = 50


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """Both models in both settings, not classified yet."""
    return build(tmp_path_factory.mktemp("error_types"))


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)


def classify(results, *args, responder=None, data=None, whole_report=False):
    """``cupid-report RESULTS --error_types ARGS`` against a fresh loopback server (report.md
    and report.csv only, unless ``whole_report``): (exit status, the server's
    classification requests, the server)."""
    responder = responder or Responder()
    with FakeLLMServer(responder=responder) as server, provider_env(server):
        code = command.main([str(results), "--error_types", "--n_bootstrap", str(N_BOOTSTRAP), "--n_workers", "1",
                             *(["--data", str(data)] if data else []),
                             *([] if whole_report else ["--no_figures", "--no_html"]), *args])
        asked = [r for r in server.requests if "## Inferred Preference" in (r["messages"] or [{}])[-1].get("content", "")]
    return code, asked, server


@pytest.fixture(scope="module")
def classified(evaluated, tmp_path_factory):
    results = tmp_path_factory.mktemp("classified") / "results"
    shutil.copytree(evaluated[0], results)
    with pytest.MonkeyPatch.context() as patch:  # the module's fixture runs before the autouse ones
        patch.setattr(config, "RETRY_BASE_DELAY", 0.001)
        patch.setattr(config, "RETRY_MAX_DELAY", 0.01)
        code, asked, _ = classify(results, whole_report=True)
    assert code == 0
    return {"results": results, "asked": asked, "md": (results / "report.md").read_text()}


def case(results, model_dir, instance_id):
    return read_json(results / model_dir / "error_types" / f"{instance_id}.json")


def step_of(data):
    return data["evaluations"][EVALUATOR]["steps"]["error_type"]


# ---------------------------------------------------------------------------------------
# The draw and the classifications
# ---------------------------------------------------------------------------------------
def test_every_inference_below_20_percent_is_drawn_and_asked_at_temperature_0(classified):
    results = classified["results"]
    for model_dir in (DEEPSEEK_DIR, MODEL_B_DIR):
        sample = read_json(results / model_dir / "error_types" / "sample.json")
        assert sample["eligible"] == sample["drawn"] == ELIGIBLE       # 7 below 20%, F1 1/6 among them
        assert (sample["scorer"], sample["classifier"], sample["f1_below"], sample["per_model"], sample["seed"]) == \
            (EVALUATOR, EVALUATOR, 0.2, 50, 0)
    for request in classified["asked"]:
        assert request["model"] == EVALUATOR and request["body"]["temperature"] == 0
        assert "Incorrect Context: The model incorrectly infers preferences from other contexts" in request["system"]
    # The two models' identical requests are asked once: the second is the response cache's.
    assert len({r["messages"][-1]["content"] for r in classified["asked"]}) == 7


def test_failed_classifications_are_recorded_with_their_reason_and_answers(classified):
    results = classified["results"]
    for model_dir in (DEEPSEEK_DIR, MODEL_B_DIR):
        unusable = step_of(case(results, model_dir, "p2__contrastive"))
        assert unusable["status"] == "failed" and unusable["error"].startswith("unparseable answer: no 'Error Type'")
        assert unusable["raw"] == [CLASSIFIER[("p2", "contrastive")]] * 3
        down = step_of(case(results, model_dir, "p3__consistent"))
        assert down["status"] == "failed" and "ModelCallFailed" in down["error"] and "HTTP 500" in down["error"]
        again = step_of(case(results, model_dir, "p3__contrastive"))
        assert again["status"] == "done" and again["output"]["type"] == "Vagueness"
        shallow = step_of(case(results, model_dir, "p1__contrastive"))
        assert shallow["output"] == {"type": "Shallow Inference", "analysis": "It restates the request."}
        assert shallow["sent"]["prompt"] == "evaluation/error_type" and shallow["sent"]["temperature"] == 0
        data = case(results, model_dir, "p2__consistent")
        assert data["f1"] == pytest.approx(1 / 6) and step_of(data)["output"]["type"] == "Incorrect Context"
    # A classification never touches the run's own files or results.
    record = read_json(results / DEEPSEEK_DIR / "p2__contrastive.json")
    assert all("error_type" not in (e.get("steps") or {}) for e in record["evaluations"].values())


def test_a_rerun_asks_only_the_failed_ones_and_counts_them_done(classified, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(classified["results"], results)
    responder = Responder()  # the two that failed now answer
    responder.classifier[("p2", "contrastive")] = "### Analysis\n\nToo broad.\n\n### Error Type\n\nVagueness"
    responder.classifier[("p3", "consistent")] = "### Analysis\n\nUnsupported.\n\n### Error Type\n\nHallucination"
    code, asked, _ = classify(results, responder=responder)
    assert code == 0
    inferred = {r["messages"][-1]["content"].split("## Inferred Preference")[1].split("---")[0].strip() for r in asked}
    assert inferred == {"The user (p2, contrastive) wants a generic tidy note.",
                        "The user (p3, consistent) wants a generic tidy note."}
    again = step_of(case(results, DEEPSEEK_DIR, "p2__contrastive"))
    assert again["status"] == "done" and again["attempts"] == 1
    md = (results / "report.md").read_text()
    assert "| DeepSeek-R1 | 7 / 9 | 7 | 7 | 0 | 0 | 2 (29% " in md


def test_a_classification_made_with_another_prompt_is_asked_afresh(classified, tmp_path):
    """The prompt changed (the sessions' dialogues shown, not their labels alone): a done
    classification recorded under another prompt version is not mixed into Table 2."""
    results = tmp_path / "results"
    shutil.copytree(classified["results"], results)
    path = results / DEEPSEEK_DIR / "error_types" / "p1__contrastive.json"
    data = read_json(path)
    step_of(data)["prompt_version"] = "an-older-prompt"
    path.write_text(json.dumps(data))
    responder = Responder()
    for key in FAILED_KEYS:
        responder.classifier[key] = "### Analysis\n\nUnsupported.\n\n### Error Type\n\nHallucination"
    code, asked, _ = classify(results, responder=responder)
    assert code == 0
    inferred = {r["messages"][-1]["content"].split("## Inferred Preference")[1].split("---")[0].strip() for r in asked}
    assert "The user (p1, contrastive) wants a generic tidy note." in inferred
    assert step_of(case(results, DEEPSEEK_DIR, "p1__contrastive"))["prompt_version"] != "an-older-prompt"


def test_the_cap_and_seed_make_the_same_draw_every_time(evaluated, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(evaluated[0], results)
    args = ["--error_per_model", "3", "--error_seed", "7", "--error_f1_below", "10"]
    eligible = [i for i in ELIGIBLE if i != "p2__consistent"]           # F1 1/6 is not below 10%
    expected = sorted(random.Random(7).sample(eligible, 3))
    responder = Responder()
    for key in FAILED_KEYS:  # every answer usable: a rerun has nothing left to ask
        responder.classifier[key] = "### Analysis\n\nUnsupported.\n\n### Error Type\n\nHallucination"
    for _ in range(2):
        code, asked, _ = classify(results, *args, responder=responder)
        assert code == 0
        sample = read_json(results / MODEL_B_DIR / "error_types" / "sample.json")
        assert (sample["eligible"], sample["drawn"], sample["f1_below"]) == (eligible, expected, 0.1)
    assert asked == []  # the second time every case was read back
    assert "| model-b | 6 / 9 | 3 | " in (results / "report.md").read_text()


def test_batch_mode_classifies_through_the_batch_api(evaluated, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(evaluated[0], results)
    code, asked, server = classify(results, "--batch")
    assert code == 0
    assert any(r["path"] == "batch" for r in asked)
    assert read_json(results / ".error_type_batches.json")["batches"]
    for model_dir in (DEEPSEEK_DIR, MODEL_B_DIR):
        types = {i: step_of(case(results, model_dir, i)) for i in ELIGIBLE}
        assert {i for i, s in types.items() if s["status"] == "failed"} == FAILED
        assert sorted(s["output"]["type"] for s in types.values() if s["status"] == "done") == \
            sorted(t for t, n in EXPECTED_COUNTS.items() for _ in range(n))


def test_without_the_instances_data_nothing_is_asked(evaluated, tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(evaluated[0], results)
    code, asked, server = classify(results, data=tmp_path / "elsewhere.jsonl")
    assert code == 2 and server.requests == []
    assert "were not found; give the data the run evaluated with --data_dir" in capsys.readouterr().err
    assert not (results / MODEL_B_DIR / "error_types").exists()


# ---------------------------------------------------------------------------------------
# Table 2 in the report
# ---------------------------------------------------------------------------------------
def share(classified, model_dir, kind):
    """The share's interval as the report computes it: personas resampled."""
    results = classified["results"]
    done = [(i.split("__")[0], step_of(case(results, model_dir, i))["output"]["type"]) for i in ELIGIBLE
            if step_of(case(results, model_dir, i))["status"] == "done"]
    return S.bootstrap([float(t == kind) for _, t in done], "mean", clusters=[p for p, _ in done],
                       n_bootstrap=N_BOOTSTRAP, seed=0)


def test_table_2_counts_shares_and_the_papers_row(classified):
    md = classified["md"]
    section = md[md.index("## Error types (Table 2)"):md.index("## Generation")]
    pct = lambda v: "—" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    for label, model_dir in (("DeepSeek-R1", DEEPSEEK_DIR), ("model-b", MODEL_B_DIR)):
        cells = " | ".join(f"{n} ({fmt_ci(share(classified, model_dir, t), pct)})" for t, n in EXPECTED_COUNTS.items())
        assert f"| {label} | 7 / 9 | 7 | 5 | 2 | 0 | {cells} |" in section
    assert "| DeepSeek-R1 | 7 / 9 | 7 | 5 | 2 | 0 | 2 (40% [" in section
    lines = section.splitlines()
    deepseek = next(k for k, line in enumerate(lines) if line.startswith("| DeepSeek-R1 |"))
    assert lines[deepseek + 1] == "| ↳ paper (Table 2; labelled by hand) | — | 50 | 50 |  |  | 86% | 10% | 2% | 2% |"
    model_b = next(k for k, line in enumerate(lines) if line.startswith("| model-b |"))
    assert not lines[model_b + 1].startswith("| ↳ paper")
    assert "DeepSeek-R1 86/10/2/2 %; Llama 3.1 405B 40/50/6/4 %" in section
    assert "Table 2" not in md[md.index("## What this report cannot show yet"):md.index("## Inference")]


def test_report_csv_and_the_export_for_checking_labels(classified):
    results = classified["results"]
    rows = list(csv.DictReader((results / "report.csv").open()))
    marked = [r for r in rows if r["error_types_drawn"]]
    assert {(r["model"], r["setting"], r["scorer"], r["instance_type"]) for r in marked} == \
        {(m, "default", EVALUATOR, "all") for m in ("deepseek-ai/DeepSeek-R1", "model-b")}
    deepseek = next(r for r in marked if r["model"] == "deepseek-ai/DeepSeek-R1")
    assert (deepseek["error_types_classified"], deepseek["error_types_failed"], deepseek["error_incorrect_context"],
            deepseek["error_incorrect_context_share"], deepseek["paper_error_incorrect_context_share"],
            deepseek["paper_error_shallow_inference_share"]) == ("5", "2", "2", "0.4", "0.86", "0.1")
    assert next(r for r in marked if r["model"] == "model-b")["paper_error_vagueness_share"] == ""
    exported = [json.loads(line) for line in (results / "error_types.jsonl").read_text().splitlines()]
    in_csv = list(csv.DictReader((results / "error_types.csv").open()))
    assert [(r["model"], r["instance_id"], r["status"]) for r in in_csv] == \
        [(r["model"], r["instance_id"], r["status"]) for r in exported]
    assert len(exported) == 14 and all(r["human_type"] == "" for r in exported)
    by_key = {(r["model"], r["instance_id"]): r for r in exported}
    failed = by_key[("model-b", "p3__consistent")]
    assert failed["status"] == "failed" and failed["classified_type"] is None and "HTTP 500" in failed["error"]
    done = by_key[("deepseek-ai/DeepSeek-R1", "p1__consistent")]
    assert (done["status"], done["classified_type"], done["classifier_analysis"], done["context_factor"]) == \
        ("done", "Incorrect Context", "It uses session 2's context.", "Factor 1")
    assert done["request"].startswith("Request p1/consistent") and done["true_preference"].startswith("Notes for p1")
    assert done["inferred_preference"] == "The user (p1, consistent) wants a generic tidy note." and done["f1"] == 0


def test_without_classifications_the_report_names_the_command(evaluated, tmp_path):
    assert command.main([str(evaluated[0]), "--output", str(tmp_path), "--n_bootstrap", "10", "--no_html",
                         "--no_figures"]) == 0
    md = (tmp_path / "report.md").read_text()
    assert "## Error types (Table 2)" not in md and not (tmp_path / "error_types.csv").exists()
    assert "- **Table 2** lacks error-type classifications of the low-F1 inferences of DeepSeek-R1, model-b." in md
    assert f"cupid-report {evaluated[0]} --error_types" in md


# ---------------------------------------------------------------------------------------
# Figure 6
# ---------------------------------------------------------------------------------------
def test_figure_6_sets_each_model_with_summaries_beside_it(classified):
    md, results = classified["md"], classified["results"]
    section = md[md.index("### Figure 6"):]
    assert "![Figure 6: full prior sessions against their summaries](fig6_summaries.png)" in section
    png = (results / "fig6_summaries.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    an = Analysis(results, n_bootstrap=N_BOOTSTRAP)
    for model, label in ((DEEPSEEK.partition(":")[2], "DeepSeek-R1"), ("model-b", "model-b")):
        full, summary = an.run(model, "default"), an.run(model, "summary")
        for task, metric, fmt, value in (("inference", "F1 (micro)", fmt_pct, lambda c: c.micro["f1"]),
                                         ("generation", "judge score", fmt_score, lambda c: c.score)):
            a, b = (value(an.cell(r, EVALUATOR, "all")) for r in (full, summary))
            d = an.paired(summary, EVALUATOR, full, EVALUATOR, task)
            row = f"| {label} | {metric} | {fmt_ci(a, fmt)} | {fmt_ci(b, fmt)} | " \
                  f"{fmt_ci(S.Estimate(d.difference, d.low, d.high, d.n), fmt)} | 9 |"
            assert row in section, row
    # model-b with summaries infers every true preference; DeepSeek-R1 answers as without.
    assert "| model-b | F1 (micro) | 18.5 [" in section and "| 100.0 [100.0, 100.0] | 81.5 [" in section
    paper = (lookup("DeepSeek-R1", "inference", "default")["values"]["f1"],
             lookup("DeepSeek-R1", "inference", "summary")["values"]["f1"])
    assert f"| 9 | {paper[0]:.1f} | {paper[1]:.1f} |" in section


def test_figure_6_is_not_drawn_without_both_settings(evaluated, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(evaluated[0], results, ignore=shutil.ignore_patterns("summary"))
    assert command.main([str(results), "--n_bootstrap", "10", "--no_html"]) == 0
    md = (results / "report.md").read_text()
    assert "### Figure 6: full prior sessions against their summaries\n\nNot drawn: no model has both a " \
           "default-setting and a summary-setting run with results." in md
    assert not (results / "fig6_summaries.png").exists()
    assert "- **Tables 9 and 10, Figure 6** lacks summary-setting results for DeepSeek-R1, model-b." in md


# ---------------------------------------------------------------------------------------
# report.html
# ---------------------------------------------------------------------------------------
@needs_chromium
def test_every_classified_case_is_one_click_from_table_2(classified, browser):
    open_report(browser, classified["results"] / "report.html")
    # The cases sit right under Table 2, grouped by model and type, each linking its instance page.
    assert browser.evaluate("document.getElementById('error-type-cases').compareDocumentPosition("
                            "document.getElementById('error-types-table-2')) & Node.DOCUMENT_POSITION_PRECEDING")
    links = browser.evaluate("""[...document.querySelectorAll('.error-cases')].map(block => [
        block.querySelector('h3').firstChild.textContent.trim(),
        [...block.querySelectorAll('h4')].map(h => [h.textContent, [...h.nextElementSibling.querySelectorAll('a.error-case')]
          .map(a => a.getAttribute('href'))])])""")
    index = browser.evaluate("(() => { const I = window.cupidReport.index(); return {runs: I.runs.map(r => [r.model, r.setting]), "
                             "inst: I.rows.inst.map(k => I.instances[k].id), run: I.rows.run, scorers: I.scorers}; })()")
    expected = {"Incorrect Context (2)": {"p1__consistent", "p2__consistent"}, "Shallow Inference (1)": {"p1__contrastive"},
                "Vagueness (1)": {"p3__contrastive"}, "Hallucination (1)": {"p3__changing"}, "Failed (2)": FAILED}
    assert [label for label, _ in links] == ["DeepSeek-R1", "model-b"]
    for label, groups in links:
        assert [kind for kind, _ in groups] == list(expected)
        for kind, hrefs in groups:
            targets = set()
            for href in hrefs:
                params = dict(p.split("=") for p in href[1:].split("&"))
                row = int(params["i"])
                assert index["scorers"][int(params["s"])] == EVALUATOR
                assert index["runs"][index["run"][row]] == [DEEPSEEK.partition(":")[2] if label == "DeepSeek-R1"
                                                            else "model-b", "default"]
                targets.add(index["inst"][row])
            assert targets == expected[kind], (label, kind)
    # One click: the instance page shows the type and the classifier's reasoning beside the inference.
    browser.click(".error-cases a.error-case")
    browser.wait_for("!!document.querySelector('#panels .sec-error-type')")
    assert browser.evaluate("document.querySelector('.inst-head h1').textContent") == "p1__consistent"
    assert browser.evaluate("document.querySelector('#panels .sec-error-type .error-type').textContent") == "Incorrect Context"
    assert "It uses session 2's context." in browser.evaluate("document.querySelector('#panels .sec-error-type').innerText")
    assert f"classified by {EVALUATOR}" in browser.evaluate("document.querySelector('#panels .sec-error-type h3').innerText")
    shot(browser, "error_type_case")
    # A failed classification: its reason and the raw answers, never a type.
    browser.evaluate("location.hash = 'summary'")
    failed = browser.evaluate("[...document.querySelectorAll('.error-cases h4')].find(h => h.textContent.startsWith('Failed'))"
                              ".nextElementSibling.querySelector('a').getAttribute('href')")
    browser.evaluate(f"location.hash = {json.dumps(failed)}")
    browser.wait_for("!!document.querySelector('#panels .sec-error-type .fail')")
    text = browser.evaluate("document.querySelector('#panels .sec-error-type').innerText")
    assert "Classification failed: unparseable answer: no 'Error Type' section" in text and "Raw answers (3)" in text
    assert browser.evaluate("document.querySelector('#panels .sec-error-type .error-type')") is None
    # A classification is not a failed step of the instance's result.
    assert browser.evaluate("document.querySelector('#panels .sec-steps').innerText").count("failed") == 0
    shot(browser, "error_type_failed")
    assert browser.errors == []
