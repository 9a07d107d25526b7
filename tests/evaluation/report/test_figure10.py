"""Figure 10's matrix (evaluation/report/figure10.py) on the fixture results, whose
instances differ: a cell's F1 is the micro F1 (pooled counts, as the paper's tables), not the
mean of the instances' F1; its score the mean judge score; each with its n and what failed."""
from __future__ import annotations

import json

import pytest

from cupid.evaluation.report import figure10 as M
from fixtures_results import CLAUDE, FAILED, GPT4O, GPT4O_DEFAULT, MISSING, build_results_dir


def prf(pm, npred, tm, ntrue):
    p, r = pm / npred, tm / ntrue
    return p, r, (0.0 if p + r == 0 else 2 * p * r / (p + r))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return build_results_dir(tmp_path_factory.mktemp("se") / "results")


def test_a_cell_holds_the_micro_f1_and_the_mean_judge_score(results, tmp_path):
    scored = [v for v in GPT4O_DEFAULT.values() if v[0] not in (FAILED, MISSING)]
    pooled = [sum(c[0][k] for c in scored) for k in range(4)]
    micro = prf(*pooled)[2]
    macro = sum(prf(*c[0])[2] for c in scored) / len(scored)
    assert abs(micro - macro) > 0.02            # the fixture tells the two apart
    scores = [v[2] for v in GPT4O_DEFAULT.values() if isinstance(v[2], int)]

    out = M.matrix([M.Side(GPT4O, "openai"), M.Side(CLAUDE, "anthropic"), M.Side("absent/model", "absent")],
                   [M.DataSet(GPT4O, "openai", results, 9), M.DataSet("nowhere", "x", tmp_path / "no", 3)],
                   n_bootstrap=50, seed=1)
    cells = {(c["model"], c["data"]): c for c in out["cells"]}
    cell = cells[(GPT4O, GPT4O)]
    assert cell["f1"]["value"] == pytest.approx(micro)
    assert cell["f1"]["n"] == len(scored)
    assert cell["f1"]["low"] <= micro <= cell["f1"]["high"]
    assert cell["score"]["value"] == pytest.approx(sum(scores) / len(scores)) and cell["score"]["n"] == len(scores)
    assert cell["same_family"] is True and cell["instances"] == 9
    assert cell["failed"] == {"f1": {"instances": 1, "steps": {"infer": 1}},
                              "score": {"instances": 1, "steps": {"generate": 1}}}
    assert cells[(CLAUDE, GPT4O)]["same_family"] is False and cells[(CLAUDE, GPT4O)]["f1"] is not None
    assert cells[("absent/model", GPT4O)]["f1"] is None and cells[("absent/model", GPT4O)]["score"] is None
    assert cells[(GPT4O, "nowhere")] == {"model": GPT4O, "data": "nowhere", "same_family": False, "f1": None,
                                         "score": None, "instances": 3, "failed": {}}
    assert out["n_bootstrap"] == 50 and out["seed"] == 1
    assert out["models"][0] == {"label": GPT4O, "family": "openai"}
    assert out["datasets"][0] == {"label": GPT4O, "family": "openai", "instances": 9, "results_dir": str(results)}


def test_cell_text_shows_value_interval_n_and_failures():
    value = {"value": 0.5, "low": 0.25, "high": 0.75, "n": 7}
    assert M.cell_text(value, 100, 1) == "50.0 [25.0, 75.0] (n=7)"
    assert M.cell_text({**value, "low": None, "high": None}, 1, 2) == "0.50 (n=7)"
    failed = {"instances": 2, "steps": {"infer": 1, "match_recall": 1}}
    assert M.cell_text(value, 100, 1, failed) == "50.0 [25.0, 75.0] (n=7; 2 failed at infer, match_recall)"
    assert M.cell_text(None, 100, 1, failed) == "— (2 failed at infer, match_recall)"
    assert M.cell_text(None, 100, 1) == "—"


def small_matrix():
    value = {"value": 0.5, "low": 0.25, "high": 0.75, "n": 4}
    cell = lambda model, data, same, f1, score, failed=None: {  # noqa: E731
        "model": model, "data": data, "same_family": same, "f1": f1, "score": score, "instances": 6,
        **({"failed": failed} if failed else {})}
    return {"models": [{"label": "a", "family": "fa"}, {"label": "b", "family": "fb"}],
            "datasets": [{"label": "a", "family": "fa", "instances": 6, "results_dir": "r/a"},
                         {"label": "b", "family": "fb", "instances": 3, "results_dir": "r/b"}],
            "cells": [cell("a", "a", True, value, {**value, "value": 8.0, "low": 7.5, "high": 8.5}),
                      cell("a", "b", False, {**value, "value": 0.05, "low": None, "high": None}, None,
                           {"score": {"instances": 3, "steps": {"generate": 3}}}),
                      cell("b", "a", False, None, {**value, "value": 2.0, "low": 1.0, "high": 3.0}),
                      cell("b", "b", True, {**value, "value": 1.0, "low": 1.0, "high": 1.0}, None)],
            "n_bootstrap": 200, "seed": 3}


def test_the_markdown_tables_bold_the_same_family_cells():
    md = M.markdown(small_matrix(), "self_enhancement.png")
    assert md.startswith("# Self-enhancement (the paper's §F.5, Figure 10)\n\n")
    assert "(200 resamples, seed 3)" in md and "![Figure 10](self_enhancement.png)" in md
    assert "| Inference F1 (%): model ↓, data by → | a (fa, 6 inst.) | b (fb, 3 inst.) |" in md
    assert "| a (fa) | **50.0 [25.0, 75.0] (n=4)** | 5.0 (n=4) |" in md
    assert "| b (fb) | — | **100.0 [100.0, 100.0] (n=4)** |" in md
    assert "| a (fa) | **8.00 [7.50, 8.50] (n=4)** | — (3 failed at generate) |" in md
    assert "| b (fb) | 2.00 [1.00, 3.00] (n=4) | **—** |" in md
    assert md.index("## Inference F1 (%)") < md.index("## Judge score") and md.endswith("|\n")
    assert "![Figure 10]" not in M.markdown(small_matrix(), None)


def test_the_figure_draws_every_cell_on_fixed_scales_with_the_family_frames(monkeypatch, tmp_path):
    drawn = {}
    monkeypatch.setattr(M, "_save", lambda plt, fig, path: drawn.update(fig=fig, path=path))
    M.plot(small_matrix(), tmp_path / "x.png")
    fig = drawn["fig"]
    f1, score = fig.axes[0], fig.axes[1]
    assert drawn["path"] == tmp_path / "x.png"
    assert [t.get_text() for t in f1.texts] == ["50.0\n[25.0, 75.0]\nn=4", "5.0\nn=4", "no result",
                                                "100.0\n[100.0, 100.0]\nn=4"]
    assert [t.get_text() for t in score.texts] == ["8.00\n[7.50, 8.50]\nn=4", "no result", "2.00\n[1.00, 3.00]\nn=4",
                                                   "no result"]
    # white text on the dark low end of viridis, black on the light high end
    assert [t.get_color() for t in f1.texts] == ["white", "white", "white", "black"]
    assert [t.get_color() for t in score.texts] == ["black", "white", "white", "white"]
    assert {t.get_fontsize() for t in f1.texts} == {9}
    frames = [p for p in f1.patches if p.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]
    assert [(round(p.get_x(), 2), round(p.get_y(), 2), p.get_width(), p.get_height(), p.get_linewidth())
            for p in frames] == [(-0.47, -0.47, 0.94, 0.94, 3), (0.53, 0.53, 0.94, 0.94, 3)]
    assert f1.images[0].get_clim() == (0, 100) and score.images[0].get_clim() == (1, 10)
    assert f1.images[0].get_array()[0, 1] == 5.0 and f1.images[0].get_array().mask[1, 0]
    assert f1.get_title() == "Inference: F1 (%)" and score.get_title() == "Generation: judge score"
    assert [t.get_text() for t in f1.get_xticklabels()] == ["a\n(fa)", "b\n(fb)"]
    assert [t.get_text() for t in f1.get_yticklabels()] == ["a\n(fa)", "b\n(fb)"]
    assert f1.get_xlabel() == "data set synthesized by" and f1.get_ylabel() == "evaluated model"
    assert fig._suptitle.get_text().startswith("Figure 10: models on data sets synthesized by each model")


def test_write_puts_the_json_the_markdown_and_the_figure_beside_each_other(tmp_path):
    data = small_matrix()
    paths = M.write(data, tmp_path)
    assert [p.name for p in paths] == ["self_enhancement.png", "self_enhancement.json", "self_enhancement.md"]
    assert json.loads((tmp_path / "self_enhancement.json").read_text(encoding="utf-8")) == data
    assert (tmp_path / "self_enhancement.png").read_bytes()[:4] == b"\x89PNG"
    assert "![Figure 10](self_enhancement.png)" in (tmp_path / "self_enhancement.md").read_text(encoding="utf-8")
    other = tmp_path / "nofig"
    other.mkdir()
    assert [p.name for p in M.write(data, other, figure=False)] == ["self_enhancement.json", "self_enhancement.md"]
    assert "![Figure 10]" not in (other / "self_enhancement.md").read_text(encoding="utf-8")
