"""A whole run whose evaluated model answers awkwardly, through each provider's real SDK:
instance A's inference ends filtered or refused with its text (read as the release reads it,
flagged), instance B's response is withheld (refused, empty, blocked: a failed step in the
provider's words). What each step records, results.json, the summary, ``--exclude_filtered``,
and the report (report.md, report.csv, report.html's data) all say it; every token the server
billed is counted."""
from __future__ import annotations

import csv
import dataclasses
import json
import re

import pytest

from cupid_responder import CupidResponder, two_instance_plans, write_two_instance_data
from cupid.evaluation import run as run_module
from cupid.evaluation.report.build import build_report
from cupid.evaluation.report.html_report import write_html_report
from cupid.evaluation.report.payload import instance_detail
from cupid.evaluation.store import run_dir_for
from fake_llm_server import FakeResponse

EVALUATOR = "gpt-4o-2024-11-20"
SORRY = "I'm sorry, but I can't help with that."
# (evaluated model, A's inference answer, its ending, B's response, its ending, B's asks)
CASES = {
    "openai": ("gpt-4.1-nano-2025-04-14", FakeResponse(finish="content_filter"), "filtered",
               FakeResponse(refusal=SORRY), "refused", 2),
    "anthropic": ("claude-3-5-sonnet-20241022", FakeResponse(finish="refusal"), "refused",
                  FakeResponse(thinking_only=True), "empty", 2),
    "google": ("gemini-2.0-flash", FakeResponse(finish="SAFETY"), "filtered",
               FakeResponse(block_reason="PROHIBITED_CONTENT"), "blocked", 1),
}


class Awkward:
    """The worked example's answers (cupid_responder), but A's inference in the shape given
    with the text it would have held, and B's response in the shape given, without text."""

    def __init__(self, inference: FakeResponse, response: FakeResponse):
        self.base = CupidResponder(two_instance_plans())
        self.inference, self.response = inference, response

    def __call__(self, req):
        kind, user = self.base.kind(req), req["messages"][-1]["content"]
        plan_a, plan_b = self.base.plans
        if kind == "infer" and plan_a.request in user:
            return dataclasses.replace(self.inference, text=self.base(req))
        if kind == "generate" and plan_b.request in user:
            return self.response
        return self.base(req)


def run(server, results_dir, model, *extra):
    return run_module.main(["--model", model, "--evaluator", EVALUATOR, "--data", str(server.data_file),
                            "--results_dir", str(results_dir), "--n_workers", "2", "--max_retries", "2",
                            "--timeout", "10", "--task", "both", *extra])


@pytest.mark.parametrize("provider", list(CASES))
def test_a_run_with_awkward_answers(fake_llm_env, tmp_path, capsys, provider):
    model, inference, inferred_as, response, responded_as, asks = CASES[provider]
    fake_llm_env.responder = Awkward(inference, response)
    fake_llm_env.data_file = write_two_instance_data(tmp_path / "data.jsonl")
    results_dir = tmp_path / "res"
    assert run(fake_llm_env, results_dir, model) == 1  # B's response failed
    run_dir = run_dir_for(results_dir, model, "default")
    results = json.loads((run_dir / "results.json").read_text())
    a = json.loads((run_dir / "persona-a__consistent.json").read_text())
    b = json.loads((run_dir / "persona-b__contrastive.json").read_text())

    # A: the text given is read as the release reads it, and flagged.
    assert a["steps"]["infer"]["status"] == "done" and a["steps"]["infer"]["flagged"] == inferred_as
    assert a["steps"]["infer"]["endings"] == [inferred_as]
    assert a["steps"]["infer"]["output"]["preference"] == two_instance_plans()[0].inferred
    # B: withheld, asked again once (a blocked prompt never), failed in the provider's words.
    generate = b["steps"]["generate"]
    assert generate["status"] == "failed" and generate["attempts"] == asks
    assert generate["endings"] == [responded_as] * asks and generate["raw"] == [""] * asks
    assert f"AnswerWithheld: the {'prompt was' if responded_as == 'blocked' else 'model' if responded_as == 'refused' else 'answer was'}" \
        in generate["error"]
    if provider == "openai":
        assert generate["error"].endswith(SORRY)  # message.refusal is not lost
    if provider == "google":
        assert "PROHIBITED_CONTENT" in generate["error"]

    # results.json: the release's numbers (A included), its flags and its endings.
    assert results["inference"]["precision"] == pytest.approx(0.5)
    assert results["counts"]["flagged"] == {"inference": {f"infer: {inferred_as}": 1}, "generation": {}}
    assert results["counts"]["failed"] == 1 and results["generation"]["n_instances"] == 1
    endings = results["answer_endings"]
    expected = {e: 0 for e in ("length", "filtered", "refused", "blocked", "empty")}
    expected[inferred_as] += 1
    expected[responded_as] += asks
    assert {k: endings[k] for k in expected} == expected
    assert endings["answers"] == 6 + 5 + asks - 1  # A's six steps, B's five with the asks
    # Every token the server billed the evaluated model (B's withheld answers too) is counted,
    # in the steps' records (recorded) and the model's tracker (this invocation).
    billed = fake_llm_env.billed_totals(model)
    for usage in (results["usage"]["recorded"][model], results["usage"]["this_invocation"]["model"]):
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == \
            (billed["prompt_tokens"], billed["completion_tokens"])
    assert results["usage"]["this_invocation"]["model"]["endings"][responded_as] == asks

    out = capsys.readouterr().out
    assert re.search(rf"answers: cut at the token limit 0, .* of {endings['answers']} answers", out)
    assert "read from a filtered or refused answer: inference 1 instance(s), included" in out

    # --exclude_filtered: the same files, A's inference left out (B's alone: P 0/1, R 2/2).
    assert run(fake_llm_env, results_dir, model, "--exclude_filtered") == 1
    excluded = json.loads((run_dir / "results.json").read_text())
    assert (excluded["inference"]["precision"], excluded["inference"]["recall"]) == (0.0, 1.0)
    assert excluded["inference_n_instances"] == 1 and excluded["counts"]["exclude_filtered"] is True
    assert "left out of the numbers above (--exclude_filtered)" in capsys.readouterr().out

    if provider != "openai":
        return
    # The report: the flag in the n cells and Coverage, the endings, one build id in every file.
    files = build_report(results_dir, tmp_path / "report", n_bootstrap=20, figures=False)
    md = files.markdown.read_text()
    assert "2/2 ⚑1" in md and "1 (infer: filtered: 1)" in md
    assert f"filtered 1, refused 2, blocked 0, empty 0 of {endings['answers']} answers" in md
    rows = list(csv.DictReader(files.csv.open()))
    assert {r["build_id"] for r in rows} == {files.build_id} and f"build `{files.build_id}`" in md
    assert {r["inference_flagged"] for r in rows if r["instance_type"] == "all"} == {"1"}
    left_out = build_report(results_dir, tmp_path / "report-x", n_bootstrap=20, figures=False,
                            exclude_filtered=True)
    assert "1/2 ⚑1" in left_out.markdown.read_text() and left_out.build_id != files.build_id
    # report.html names its build, and says so when report.md beside it is of another.
    page = write_html_report(files.analysis, files.markdown.parent, build_id=files.build_id).read_text("latin-1")
    assert f"build {files.build_id}" in page and "build the report again" not in page
    page = write_html_report(files.analysis, files.markdown.parent, build_id="stale").read_text("latin-1")
    assert f"report.md beside this page is of build {files.build_id}, this page of build stale" in page
    # report.html's instance page data: each step's endings and flag.
    steps = instance_detail(a)["steps"]
    assert steps["infer"]["flagged"] == "filtered" and steps["infer"]["endings"] == ["filtered"]
    assert instance_detail(b)["steps"]["generate"]["endings"] == ["refused", "refused"]
