"""The report's intervals resample personas, not instances (statistics.py's ``clusters``,
analysis.py): a persona's three instances share its sessions, so they are not independent
draws. And the bootstrap's percentile interval pinned exactly on the resample indices."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cupid.evaluation.metrics import InferenceCounts
from cupid.evaluation.report import statistics as S
from cupid.evaluation.report.analysis import Analysis
from cupid.evaluation import report as R
from cupid.evaluation.report.results import load_runs, outcome
from fixtures_results import GPT4O, R1, build_realistic_results_dir
from fixtures_results import S as SCORER

SQRT3 = np.sqrt(3)
# A 95% percentile width from B resamples has a Monte-Carlo relative error: over 40 seeds,
# the ratio of two widths (each from B = 10,000 resamples of 100 personas or their 300
# instances) had a relative standard deviation of 1.3% around √3 (largest deviation 3.7%).
# 6% is about 4.5 standard deviations: a seed or numpy stream change will not trip it, and
# instance resampling (ratio 1) or clustering by the wrong key is far outside it.
WIDE_B, RATIO_TOLERANCE = 10_000, 0.06


def agreeing_personas(n_personas: int = 100, seed: int = 7) -> tuple[list[float], list[str]]:
    """Each persona's three instances have the same value; instances listed type by type
    (as a results directory's sorted ids are not), so a cluster is never a run of neighbours."""
    values = np.random.default_rng(seed).normal(5.0, 2.0, size=n_personas)
    return np.tile(values, 3).tolist(), [f"p{c}" for c in range(n_personas)] * 3


def width(est: S.Estimate) -> float:
    return est.high - est.low


def ic(pm, npred, tm, ntrue) -> InferenceCounts:
    return InferenceCounts(pm, npred, tm, ntrue)


# ---------------------------------------------------------------------------------------
# The √3 check, and equality with one instance per persona
# ---------------------------------------------------------------------------------------
def test_clustered_interval_is_sqrt3_wider_when_a_personas_three_instances_agree():
    values, personas = agreeing_personas()
    by_instance = S.bootstrap(values, n_bootstrap=WIDE_B, seed=0)
    by_persona = S.bootstrap(values, clusters=personas, n_bootstrap=WIDE_B, seed=0)
    assert by_persona.value == by_instance.value and by_persona.n == by_instance.n == 300
    assert width(by_persona) / width(by_instance) == pytest.approx(SQRT3, rel=RATIO_TOLERANCE)


def test_clustered_paired_interval_is_sqrt3_wider_when_a_personas_differences_agree():
    rng = np.random.default_rng(11)
    values, personas = agreeing_personas(seed=3)   # values[k] is persona k's A − B difference
    b = {k: float(v) for k, v in enumerate(rng.normal(6.0, 2.0, size=300))}
    a = {k: b[k] + values[k] for k in b}
    of = dict(enumerate(personas))
    by_instance = S.paired_bootstrap(a, b, "mean", n_bootstrap=WIDE_B, seed=0)
    by_persona = S.paired_bootstrap(a, b, "mean", clusters=of, n_bootstrap=WIDE_B, seed=0)
    assert by_persona.difference == pytest.approx(by_instance.difference) == pytest.approx(np.mean(values))
    ratio = (by_persona.high - by_persona.low) / (by_instance.high - by_instance.low)
    assert ratio == pytest.approx(SQRT3, rel=RATIO_TOLERANCE)


def test_clustered_interval_matches_the_clustered_standard_error():
    # Instances of a persona correlated but not equal (persona effect SD 2, instance noise SD 1).
    # The interval's half-width over 1.96 is the clustered (sandwich) standard error of a mean,
    # sqrt(Σ_c (Σ_i (x_ci − mean))²) / n, the formula behind inspect_ai's stderr(cluster=...)
    # without its C/(C−1) correction, which the bootstrap's plug-in variance does not make.
    # Over 30 seeds the half-width / 1.96 was within 0.8% of it (SD; largest 2.3%).
    rng = np.random.default_rng(5)
    persona_effect = rng.normal(0.0, 2.0, size=100)
    values = np.concatenate([persona_effect + rng.normal(5.0, 1.0, size=100) for _ in range(3)])
    personas = [f"p{c}" for c in range(100)] * 3
    est = S.bootstrap(values.tolist(), clusters=personas, n_bootstrap=WIDE_B, seed=0)
    deviations = (values - values.mean()).reshape(3, 100).sum(axis=0)
    clustered_se = np.sqrt((deviations ** 2).sum()) / values.size
    assert width(est) / (2 * 1.959964) == pytest.approx(clustered_se, rel=RATIO_TOLERANCE)
    # Resampling instances is 1.6 times too narrow here (design effect 1 + 2·0.8 = 2.6).
    assert width(S.bootstrap(values.tolist(), n_bootstrap=WIDE_B, seed=0)) < width(est) / 1.4


def test_one_instance_per_persona_gives_exactly_the_instance_interval():
    rng = np.random.default_rng(2)
    values = rng.normal(5.0, 2.0, size=40).tolist()
    counts = [ic(*c) for c in rng.integers(0, 4, size=(40, 4)).tolist()]
    personas = [f"persona-{k}" for k in range(40)]
    assert S.bootstrap(values, clusters=personas, seed=4) == S.bootstrap(values, seed=4)
    for kind in ("micro", "macro"):
        assert S.bootstrap_inference(counts, kind, clusters=personas, seed=4) == S.bootstrap_inference(counts, kind, seed=4)
    a = {f"i{k}": c for k, c in enumerate(counts)}
    b = {f"i{k}": c for k, c in enumerate(reversed(counts))}
    of = {f"i{k}": personas[k] for k in range(40)}
    assert S.paired_bootstrap(a, b, "micro_f1", clusters=of, seed=4) == S.paired_bootstrap(a, b, "micro_f1", seed=4)


# ---------------------------------------------------------------------------------------
# Ratios of sums over the drawn personas; the percentile interval pinned exactly
# ---------------------------------------------------------------------------------------
def test_micro_precision_resamples_personas_as_ratios_of_their_sums():
    # Persona A: 3/4 and 1/4 matched (4/8 pooled); persona B: 0/2. Two personas give three
    # kinds of resample: A A → 8/16, A B → 4/10, B B → 0/4; over 2,000 resamples the 2.5th and
    # 97.5th percentiles are the extremes, 0 and 1/2. Resampling the three instances instead
    # reaches 3/4 (the first instance drawn thrice).
    counts = [ic(3, 4, 1, 1), ic(0, 2, 1, 1), ic(1, 4, 1, 1)]
    by_persona = S.bootstrap(counts, "micro_precision", clusters=["A", "B", "A"], n_bootstrap=2000, seed=0)
    assert by_persona.value == pytest.approx(0.4)
    assert (by_persona.low, by_persona.high) == (0.0, 0.5)
    by_instance = S.bootstrap(counts, "micro_precision", n_bootstrap=2000, seed=0)
    assert by_instance.high == 0.75


def resampled(draws: np.ndarray, members: list[list[int]], statistic) -> np.ndarray:
    """The statistic on each resample, recomputed from the instances of the drawn personas."""
    return np.array([statistic([i for c in row for i in members[c]]) for row in draws])


def test_percentile_interval_is_pinned_on_the_resample_indices():
    # Eight personas of one to three instances (20 in all, a persona's not adjacent), with
    # checklists of one to five entries and matched sums that are not multiples of 0.5, so
    # that the resampled precisions do not tie and every percentile rule gives its own bounds.
    rng = np.random.default_rng(1)
    personas = [f"p{k}" for k in rng.permutation([0, 0, 0, 1, 1, 2, 3, 3, 3, 4, 4, 5, 5, 5, 6, 7, 7, 2, 6, 1])]
    sizes = rng.integers(1, 6, size=20)
    counts = [ic(float(rng.uniform(0, n)), int(n), 1, 1) for n in sizes]
    order = list(dict.fromkeys(personas))           # the implementation's order: first appearance
    members = [[i for i, p in enumerate(personas) if p == name] for name in order]
    # The resamples as documented: numpy's default_rng(seed) draws 1000 (the default) rows of
    # one persona index per persona.
    draws = np.random.default_rng(3).integers(0, len(order), size=(1000, len(order)))

    def precision(ids):
        return sum(counts[i].n_predicted_matched for i in ids) / sum(counts[i].n_predicted for i in ids)

    samples = resampled(draws, members, precision)
    expected = np.percentile(samples, [2.5, 97.5])   # numpy's default: linear interpolation
    est = S.bootstrap(counts, "micro_precision", clusters=personas, seed=3)
    assert (est.low, est.high) == pytest.approx(tuple(expected), abs=1e-12)
    assert est.value == pytest.approx(precision(range(20)), abs=1e-12)
    # The pin tells the alternatives apart: another percentile rule, another resample count
    # (999 rows of the same stream), or instance resampling would each give other bounds.
    others = [np.percentile(samples, [2.5, 97.5], method="nearest"),
              np.percentile(samples, [2.5, 97.5], method="median_unbiased"),
              np.percentile(samples[:999], [2.5, 97.5]),
              np.percentile(resampled(np.random.default_rng(3).integers(0, 20, size=(1000, 20)),
                                      [[i] for i in range(20)], precision), [2.5, 97.5])]
    for other in others:
        assert np.abs(other - expected).max() > 1e-6


def test_paired_interval_and_p_value_are_pinned_on_the_resample_indices():
    a = {"x1": 6.0, "x2": 7.0, "y1": 3.0, "z1": 9.0, "z2": 4.0, "w1": 5.0}
    b = {"x1": 5.0, "x2": 7.5, "y1": 4.0, "z1": 6.0, "z2": 4.0, "w1": 2.0}
    of = {k: k[0] for k in a}                        # x, y, z, w
    keys = sorted(a)                                 # the pairing's order: w1 x1 x2 y1 z1 z2
    order = list(dict.fromkeys(of[k] for k in keys))
    members = [[k for k in keys if of[k] == p] for p in order]
    draws = np.random.default_rng(9).integers(0, len(order), size=(400, len(order)))
    diffs = np.array([np.mean([a[k] for c in row for k in members[c]]) - np.mean([b[k] for c in row for k in members[c]])
                      for row in draws])
    d = S.paired_bootstrap(a, b, "mean", clusters=of, n_bootstrap=400, seed=9)
    assert d.difference == pytest.approx(np.mean(list(a.values())) - np.mean(list(b.values())))
    assert (d.low, d.high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-12)
    assert d.p_value == pytest.approx(min(1.0, 2 * min(np.mean(diffs <= 0), np.mean(diffs >= 0))))


def test_cluster_labels_must_match_the_items():
    with pytest.raises(ValueError, match="2 cluster labels for 3 items"):
        S.bootstrap([1.0, 2.0, 3.0], clusters=["a", "b"])
    with pytest.raises(KeyError):
        S.paired_bootstrap({"i": 1.0, "j": 2.0}, {"i": 0.0, "j": 1.0}, clusters={"i": "p"})


# ---------------------------------------------------------------------------------------
# The report: cells, paired differences and the words that say so
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def realistic(tmp_path_factory):
    return build_realistic_results_dir(tmp_path_factory.mktemp("clustered") / "results", n_personas=30,
                                       models={GPT4O: (0.45, 0.0), R1: (0.55, 0.5)})


def test_report_cells_resample_the_personas_of_the_instance_files(realistic):
    an = Analysis(realistic, n_bootstrap=300, seed=5)
    run = an.run(GPT4O, "default")
    out = an.outcome(run, SCORER, "inference")
    ids = sorted(out.values)
    counts = [out.values[i] for i in ids]
    personas = [run.instances[i]["persona_id"] for i in ids]
    assert len(set(personas)) == 30 and len(ids) == 90
    cell = an.cell(run, SCORER, "all")
    assert cell.micro == S.bootstrap_inference(counts, "micro", clusters=personas, n_bootstrap=300, seed=5)
    assert cell.macro == S.bootstrap_inference(counts, "macro", clusters=personas, n_bootstrap=300, seed=5)
    assert cell.micro != S.bootstrap_inference(counts, "micro", n_bootstrap=300, seed=5)
    scores = an.outcome(run, SCORER, "generation").values
    assert cell.score == S.bootstrap([scores[i] for i in ids], "mean", clusters=personas, n_bootstrap=300, seed=5)
    assert cell.score != S.bootstrap([scores[i] for i in ids], "mean", n_bootstrap=300, seed=5)
    # One instance type holds one instance per persona: the same interval as instance resampling.
    typed = [i for i in ids if run.instance_type(i) == "contrastive"]
    assert an.cell(run, SCORER, "contrastive").micro == \
        S.bootstrap_inference([out.values[i] for i in typed], "micro", n_bootstrap=300, seed=5)


def test_report_paired_differences_resample_personas(realistic):
    an = Analysis(realistic, n_bootstrap=300, seed=5)
    run_a, run_b = an.run(GPT4O, "default"), an.run(R1, "default")
    for task, metric in (("inference", "micro_f1"), ("generation", "mean")):
        a, b = (an.outcome(r, SCORER, task).values for r in (run_a, run_b))
        personas = {i: run_a.instances[i]["persona_id"] for i in a}
        d = an.paired(run_a, SCORER, run_b, SCORER, task)
        assert d == S.paired_bootstrap(a, b, metric, clusters=personas, n_bootstrap=300, seed=5)
        assert d != S.paired_bootstrap(a, b, metric, n_bootstrap=300, seed=5)


def test_report_says_its_intervals_are_persona_clustered(realistic, tmp_path):
    assert R.main([str(realistic), "--output", str(tmp_path), "--n_bootstrap", "50", "--no_figures"]) == 0
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    notes = md.split("## Runs")[0]
    assert "bootstrap intervals clustered by persona" in notes and "up to √3 too narrow" in notes
    differences = md.split("## Paired differences")[1]
    assert "95% CI clustered by persona" in differences
    html = (tmp_path / "report.html").read_bytes()   # the page's data chunks are gzip
    assert "bootstrap intervals clustered by persona".encode() in html
    assert "paired bootstrap 95% interval clustered by persona".encode() in html   # the compare view's note


def test_an_instance_without_persona_id_is_its_own_persona_and_is_warned_about(realistic, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"model": "m", "setting": "default"}))
    source = next(realistic.rglob("r000__consistent.json"))
    for name, persona in (("r000__consistent", None), ("r000__contrastive", "r000")):
        data = json.loads(source.read_text())
        data.update(instance_id=name, persona_id=persona, model="m")
        (run_dir / f"{name}.json").write_text(json.dumps(data))
    run, = load_runs(tmp_path)
    assert run.persona("r000__contrastive") == "r000"
    assert run.persona("r000__consistent") not in ("r000", "r000__contrastive")
    assert any("1 instance file(s) name no persona_id" in w for w in run.warnings)
    assert outcome(run, SCORER, "inference").n == 2
