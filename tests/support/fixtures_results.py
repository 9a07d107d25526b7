"""A results directory in the format of docs/results_format.md, with known numbers.

Three models, 3 personas x 3 instance types each, two scorers (the GPT-4o evaluator
``S`` and PrefMatcher ``M``), settings default / oracle / summary / oracle_preference for
GPT-4o, default for the other two. GPT-4o's default run is partial: one instance's infer
step failed, one instance has not been evaluated yet and its generate step failed, and
its results.json (and results.<scorer>.json beside it, as evaluation/store.py writes)
hold deliberately wrong aggregates (the report must recompute). In the oracle setting the
instance without a relevant prior session is skipped, as the pipeline does.

Counts per instance are (n_predicted_matched, n_predicted, n_true_matched, n_true).
The numbers the tests expect are worked out by hand in tests/evaluation/report/test_report.py.
"""
from __future__ import annotations

from pathlib import Path

from cupid.utils.dataset import safe_name
from cupid.utils.io import atomic_write_json

S = "gpt-4o-2024-11-20"
M = "gpt-4o-2024-11-20+kixlab/prefmatcher-7b"
GPT4O = "gpt-4o-2024-08-06"
R1 = "deepseek-ai/DeepSeek-R1"
CLAUDE = "claude-3-7-sonnet-20250219"

PERSONAS = ("p1", "p2", "p3")
TYPES = ("consistent", "contrastive", "changing")

# Prior-history facts, shared by every model in the default setting.
RELEVANT_POSITIONS = {"consistent": [1, 2], "contrastive": [3, 4], "changing": [7, 8]}
NO_RELEVANT = {("p3", "contrastive")}  # left out of Figure 3
HISTORY_TOKENS = {(p, t): 1000 * (3 * TYPES.index(t) + PERSONAS.index(p) + 1)
                  for p in PERSONAS for t in TYPES}  # 1000 .. 9000, distinct

FAILED = "failed"
MISSING = "missing"

# GPT-4o, default setting: per instance (S counts, M counts, judge score).
GPT4O_DEFAULT = {
    ("p1", "consistent"): ((1, 2, 1, 2), (1, 2, 1, 2), 6),
    ("p2", "consistent"): ((2, 2, 1, 2), (1.5, 2, 1, 2), 8),
    ("p3", "consistent"): (FAILED, FAILED, 5),           # infer failed; generation fine
    ("p1", "contrastive"): ((0, 2, 0, 3), (0, 2, 0, 3), 2),
    ("p2", "contrastive"): ((1.5, 3, 1, 2), (1, 3, 1, 2), 4),
    ("p3", "contrastive"): ((1, 1, 2, 2), (1, 1, 2, 2), 7),
    ("p1", "changing"): ((2, 2, 2, 2), (2, 2, 2, 2), 10),
    ("p2", "changing"): ((1, 2, 1.5, 3), (1, 2, 1.5, 3), 6),
    ("p3", "changing"): (MISSING, MISSING, FAILED),      # not evaluated yet; generate failed
}


def step(status: str = "done", output: dict | None = None, error: str | None = None,
         model: str = "x") -> dict:
    return {"status": status, "model": model, "prompt_version": "abc123",
            "output": output if status == "done" else None, "raw": ["..."],
            "error": error if status == "failed" else None, "attempts": 1 if status == "done" else 3,
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            "finished_at": "2025-01-01T00:00:00+00:00"}


def inference_block(counts) -> dict:
    pm, npred, tm, ntrue = counts
    precision, recall = pm / npred, tm / ntrue
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1,
            "n_predicted_matched": pm, "n_predicted": npred, "n_true_matched": tm, "n_true": ntrue}


def evaluation_entry(scorer: str, counts, score) -> dict:
    evaluator, _, matcher = scorer.partition("+")
    steps: dict = {}
    entry = {"evaluator": evaluator, "matcher": matcher or evaluator, "steps": steps,
             "inference": None, "generation": None}
    if counts is not None:
        steps["decompose"] = step(output={"checklist": ["q1", "q2"]}, model=evaluator)
        steps["match_precision"] = step(output={"results": []}, model=matcher or evaluator)
        steps["match_recall"] = step(output={"results": []}, model=matcher or evaluator)
        entry["inference"] = inference_block(counts)
    if score is not None:
        steps["judge"] = step(output={"analysis": "...", "score": score}, model=evaluator)
        entry["generation"] = {"score": score}
    return entry


def empty_entry(scorer: str) -> dict:
    """A scorer entry as the pipeline creates it before any of its steps ran."""
    evaluator, _, matcher = scorer.partition("+")
    return {"evaluator": evaluator, "matcher": matcher or evaluator, "steps": {},
            "inference": None, "generation": None}


def instance_file(model: str, setting: str, persona: str, itype: str, *, s_counts=None,
                  m_counts=None, score=None, infer: str | None = "done",
                  generate: str | None = "done", summarize: bool = False,
                  empty_scorers: tuple = ()) -> dict:
    """One instance file. ``s_counts``/``m_counts``: counts or None (no result; the scorer's
    entry is absent unless named in ``empty_scorers``). ``infer``/``generate``: step status
    or None (step absent)."""
    steps: dict = {}
    if summarize:
        steps["summarize"] = step(output={"summaries": []}, model=model)
    if infer:
        steps["infer"] = step(infer, {"analysis": "...", "preference": "p"}, "ModelCallFailed: 500", model)
    if generate:
        steps["generate"] = step(generate, {"response": "r"}, "ModelCallFailed: timeout", model)
    evaluations = {}
    if s_counts is not None or score is not None:
        evaluations[S] = evaluation_entry(S, s_counts, score)
    if m_counts is not None:
        evaluations[M] = evaluation_entry(M, m_counts, None)
    for scorer in empty_scorers:
        evaluations.setdefault(scorer, empty_entry(scorer))
    positions = [] if (persona, itype) in NO_RELEVANT else RELEVANT_POSITIONS.get(itype, [])
    return {
        "instance_id": f"{persona}__{itype}", "persona_id": persona, "instance_type": itype,
        "model": model, "setting": setting,
        "history": {"n_sessions": 8, "relevant_positions": positions,
                    "history_tokens": HISTORY_TOKENS.get((persona, itype), 0)},
        "steps": steps, "evaluations": evaluations,
    }


def write_run(root: Path, model: str, setting: str, instances: list[dict],
              results: dict | None = None) -> Path:
    directory = root / safe_name(model)
    if setting != "default":
        directory = directory / setting
    atomic_write_json(directory / "run.json", {
        "model": model, "setting": setting, "prompt_versions": {"evaluation/preference_inferrer": "abc123"},
        "data_source": "fixture", "created": "2025-01-01T00:00:00+00:00"})
    for data in instances:
        atomic_write_json(directory / f"{data['instance_id']}.json", data)
    if results is not None:
        atomic_write_json(directory / "results.json", results)
    return directory


def uniform_run(model: str, setting: str, s_counts, m_counts, score, *, infer=True, generate=True,
                summarize=False) -> list[dict]:
    return [instance_file(model, setting, p, t, s_counts=s_counts, m_counts=m_counts, score=score,
                          infer="done" if infer else None, generate="done" if generate else None,
                          summarize=summarize)
            for p in PERSONAS for t in TYPES]


def build_results_dir(root: str | Path) -> Path:
    root = Path(root)
    # --- GPT-4o, default (partial) ---------------------------------------------------
    instances = []
    for (persona, itype), (s_counts, m_counts, score) in GPT4O_DEFAULT.items():
        infer = "failed" if s_counts == FAILED else "done"
        generate = "failed" if score == FAILED else "done"
        counts_s = s_counts if isinstance(s_counts, tuple) else None
        counts_m = m_counts if isinstance(m_counts, tuple) else None
        judge = score if isinstance(score, int) else None
        data = instance_file(GPT4O, "default", persona, itype, s_counts=counts_s, m_counts=counts_m,
                             score=judge, infer=infer, generate=generate, empty_scorers=(S, M))
        instances.append(data)
    wrong = {"inference": {"precision": 0.99, "recall": 0.99, "f1": 0.99, "n_true_matched": 1,
                           "n_predicted_matched": 1, "n_true": 1, "n_predicted": 1},
             "generation": {"average_score": 1.0, "n_instances": 1},
             "counts": {"instances": 9, "evaluated": 7, "failed": 2, "skipped": 0},
             "settings": {"model": GPT4O, "setting": "default", "evaluator": S, "matcher": S,
                          "scorer": S, "task": "both"}}
    directory = write_run(root, GPT4O, "default", instances, wrong)
    atomic_write_json(directory / f"results.{safe_name(S)}.json", wrong)
    # --- GPT-4o, other settings --------------------------------------------------------
    oracle = uniform_run(GPT4O, "oracle", (2, 2, 1.5, 2), None, 9)
    for i, data in enumerate(oracle):
        if (data["persona_id"], data["instance_type"]) in NO_RELEVANT:  # skipped by the pipeline
            oracle[i] = instance_file(GPT4O, "oracle", data["persona_id"], data["instance_type"],
                                      infer=None, generate=None, empty_scorers=(S,))
    write_run(root, GPT4O, "oracle", oracle)
    directory = write_run(root, GPT4O, "summary",
                          uniform_run(GPT4O, "summary", (1, 2, 2, 2), None, 7, summarize=True))
    atomic_write_json(directory / "session_summaries" / "0123abcd.json",
                      {"session": "...", "summary": {"session_id": 1}})
    write_run(root, GPT4O, "oracle_preference",
              uniform_run(GPT4O, "oracle_preference", None, None, 10, infer=False))
    # --- DeepSeek-R1 and Claude 3.7 Sonnet, default -------------------------------------
    write_run(root, R1, "default", uniform_run(R1, "default", (1, 2, 1, 2), (1, 2, 1.5, 2), 7))
    write_run(root, CLAUDE, "default", uniform_run(CLAUDE, "default", (2, 2, 1, 2), (2, 2, 2, 2), 9))
    return root


# ---------------------------------------------------------------------------------------
# A paper-scale results tree (for looking at the figures, and for tests of their data)
# ---------------------------------------------------------------------------------------
REALISTIC_MODELS = {  # model: (skill: chance a checklist entry is matched, judge offset)
    GPT4O: (0.45, 0.0),
    CLAUDE: (0.6, 1.0),
    R1: (0.55, 0.5),
    "o3-mini-2025-01-31": (0.4, -0.5),
}


def build_realistic_results_dir(root: str | Path, n_personas: int = 252, seed: int = 0,
                                models: dict | None = None) -> Path:
    """Default-setting runs of several models over ``n_personas`` x 3 instances with
    dataset-like histories (8 sessions, ~8,200 tokens, 2 relevant sessions) and random but
    model-dependent counts, judged and matched by S and M; plus an oracle run of GPT-4o."""
    import random

    rng = random.Random(seed)
    root = Path(root)
    models = models or REALISTIC_MODELS
    histories = {}
    for p in range(n_personas):
        for itype in TYPES:
            positions = sorted(rng.sample(range(1, 9), 2))
            histories[(f"r{p:03d}", itype)] = (positions, max(2000, int(rng.gauss(8200, 1800))))
    for model, (skill, offset) in models.items():
        for setting in ("default", "oracle") if model == GPT4O else ("default",):
            instances = []
            for (persona, itype), (positions, tokens) in histories.items():
                # recency helps a little: later relevant sessions are matched more often
                chance = min(0.95, skill + (0.25 if setting == "oracle" else 0) + 0.02 * (sum(positions) / 2 - 4.5))
                n_pred, n_true = rng.randint(1, 4), rng.randint(2, 4)
                pm = sum(rng.choice((0, 0.5, 1)) if rng.random() < chance else 0 for _ in range(n_pred))
                tm = sum(rng.choice((0.5, 1)) if rng.random() < chance else 0 for _ in range(n_true))
                pm_m = min(n_pred, max(0, pm + rng.choice((-0.5, 0, 0, 0.5))))
                f1 = 0 if pm + tm == 0 else 2 * (pm / n_pred) * (tm / n_true) / ((pm / n_pred) + (tm / n_true) or 1)
                score = max(1, min(10, round(3 + 6 * f1 + offset + rng.gauss(0, 1.5))))
                data = instance_file(model, setting, persona, itype, s_counts=(pm, n_pred, tm, n_true),
                                     m_counts=(pm_m, n_pred, tm, n_true) if setting == "default" else None,
                                     score=score)
                data["history"]["relevant_positions"] = positions
                data["history"]["history_tokens"] = tokens
                instances.append(data)
            write_run(root, model, setting, instances)
    return root
