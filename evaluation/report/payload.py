"""What report.html's script draws from: the index (one row per run and instance, the
instances' shared fields and scores, the worst rows) and the data chunks (the distinct prior
sessions in parts of SESSION_PART, each run's instance pages in parts of PART instances),
each compressed on a thread while the next run is read."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any, Iterable

from .analysis import Analysis
from .compare_data import paired_entries
from .error_types import Classified, load as load_error_types
from .results import Run, history_of, setting_order
from ...utils.dataset import Instance
from ...utils.html_page import gzip_json
from ...utils.models.catalog import price_of
from ...utils.models.usage import cost_at
from ..steps import DECOMPOSE, GENERATE, INFER, JUDGE, MATCH_PRECISION, MATCH_RECALL, SUMMARIZE

STEP_FIELDS = ("status", "model", "output", "error", "attempts", "usage", "endings", "flagged")
# Instances per detail chunk and sessions per sessions chunk: an instance page inflates only
# the few chunks it shows (a run's whole chunk at paper scale is ~6 MB of JSON to parse).
PART = 64
SESSION_PART = 64
ROUND = 4
# The step an instance page's part shows, by the step table's own names (the page spells none).
PAGE_PARTS = {"summaries": SUMMARIZE.name, "inferred": INFER.name, "response": GENERATE.name,
              "checklist": DECOMPOSE.name, "precision": MATCH_PRECISION.name, "recall": MATCH_RECALL.name,
              "judgement": JUDGE.name}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(float(value), ROUND)


_price = lru_cache(maxsize=None)(price_of)  # a report prices tens of thousands of steps of a few models


def trim_step(step: dict) -> dict:
    """What the page shows of a step: raw answers only when a parse or call failed (the
    parsed output holds the rest), the sent request only for a failed step, and its cost in
    USD at the catalog's price of its model."""
    out = {k: step[k] for k in STEP_FIELDS if k in step}
    if step.get("status") != "done" or (step.get("attempts") or 1) > 1:
        out["raw"] = step.get("raw")
        if step.get("status") != "done" and step.get("request") is not None:
            out["request"] = step["request"]
    usage = step.get("usage")
    if usage:
        cost = cost_at(_price(step.get("model")), int(usage.get("prompt_tokens") or 0),
                       int(usage.get("completion_tokens") or 0),
                       cached_prompt_tokens=int(usage.get("cached_prompt_tokens") or 0),
                       cache_write_tokens=int(usage.get("cache_write_tokens") or 0))
        if cost is not None:
            out["cost"] = cost
    return out


def _all_steps(detail: dict) -> Iterable[tuple[str, dict]]:
    """The steps of an ``instance_detail``, the model's and every scorer's."""
    yield from detail["steps"].items()
    for evaluation in detail["evaluations"].values():
        yield from evaluation["steps"].items()


def _without_repeated_entries(step: dict, entries: list | None) -> dict:
    """A match step whose results repeat the checklist they label (entry k of ``entries``
    at index k + 1): the page reads the entry from the checklist, so it is left out."""
    output = step.get("output")
    if not entries or not isinstance(output, dict) or not isinstance(output.get("results"), list):
        return step
    results = []
    for r in output["results"]:
        index = r.get("index") if isinstance(r, dict) else None
        if (isinstance(index, int) and 1 <= index <= len(entries) and r.get("entry") == entries[index - 1]):
            r = {k: v for k, v in r.items() if k != "entry"}
        results.append(r)
    return {**step, "output": {**output, "results": results}}


def instance_detail(data: dict, checklist: list | None = None) -> dict:
    """What an instance page shows of one run's instance file (``checklist``: the ground
    truth's, when the instance data are known)."""
    evaluations = {}
    for scorer, evaluation in (data.get("evaluations") or {}).items():
        if not isinstance(evaluation, dict):
            continue
        evaluations[scorer] = {
            "evaluator": evaluation.get("evaluator"), "matcher": evaluation.get("matcher"),
            "inference": evaluation.get("inference"), "generation": evaluation.get("generation"),
            "steps": {n: trim_step(s) for n, s in (evaluation.get("steps") or {}).items()
                      if isinstance(s, dict)}}
        scorer_steps = evaluations[scorer]["steps"]
        decomposed = (scorer_steps.get(DECOMPOSE.name) or {}).get("output") or {}
        for step, entries in ((MATCH_PRECISION, decomposed.get("checklist") if isinstance(decomposed, dict) else None),
                              (MATCH_RECALL, checklist)):
            if step.name in scorer_steps and (step is MATCH_RECALL or isinstance(decomposed, dict)):
                scorer_steps[step.name] = _without_repeated_entries(scorer_steps[step.name], entries)
    return {"steps": {n: trim_step(s) for n, s in (data.get("steps") or {}).items() if isinstance(s, dict)},
            "evaluations": evaluations, "history": data.get("history") or {}, "shown": data.get("shown")}


class Payload:
    """The index, the shared sessions (in parts of SESSION_PART) and each run's details (in
    parts of PART instances, by the instance's index), of the runs of ``analysis``."""

    def __init__(self, analysis: Analysis, instance_data: dict[str, Instance]):
        order = {m: k for k, m in enumerate(analysis.models())}
        self.runs = sorted(analysis.runs, key=lambda r: (order[r.model], setting_order(r.setting)))
        self.scorers = sorted({s for r in self.runs for s in r.scorers}, key=lambda s: ("+" in s, s))
        self.analysis = analysis
        self.data = instance_data
        self.sessions: list[list] = []
        self._session_ids: dict[tuple, int] = {}
        self.instances: list[dict] = []
        self._instance_index: dict[str, int] = {}
        self.rows: dict[str, list] = {"inst": [], "run": [], "tok": [], "cost": [], "unpriced": [], "fail": [],
                                      "flag": []}
        self.metrics = [{"p": [], "r": [], "f1": [], "j": []} for _ in self.scorers]
        # Table 2's classified inferences, by run index (default-setting runs only).
        self.classified: dict[int, Classified] = {}
        # The chunks in page order (the sessions', then each run's), each compressed while
        # the next run is read (gzip releases the GIL), so no run's details outlive their
        # chunk's text.
        self.chunks: list[tuple[str, Future[str]]] = []
        with ThreadPoolExecutor(max_workers=2) as compressor:
            def compress(name: str, value: Any) -> None:
                self.chunks.append((name, compressor.submit(gzip_json, value)))

            for run in self.runs:
                for instance_id in run.ids():
                    self._instance(instance_id, run.instances[instance_id])
            for start in range(0, len(self.sessions), SESSION_PART):
                compress(f"sessions-{start // SESSION_PART}", self.sessions[start:start + SESSION_PART])
            for run_index, run in enumerate(self.runs):
                for part, values in sorted(self._run_details(run_index, run).items()):
                    compress(f"run{run_index}-{part}", values)

    def _session(self, session) -> int:
        turns = tuple((0 if t.role == "user" else 1, t.content) for t in session.dialogue)
        key = (session.context_factor, session.contextual_preference, turns)
        if key not in self._session_ids:
            self._session_ids[key] = len(self.sessions)
            self.sessions.append([session.context_factor, session.contextual_preference, [list(t) for t in turns]])
        return self._session_ids[key]

    def _instance(self, instance_id: str, data: dict) -> int:
        if instance_id in self._instance_index:
            return self._instance_index[instance_id]
        history = history_of(data)
        entry: dict[str, Any] = {"id": instance_id, "persona": data.get("persona_id"),
                                 "type": data.get("instance_type") or "unknown",
                                 "relevant": history.get("relevant_positions"),
                                 "tokens": history.get("history_tokens")}
        instance = self.data.get(instance_id)
        if instance is not None:
            entry.update(request=instance.current_request, factor=instance.current_context_factor,
                         preference=instance.current_contextual_preference,
                         checklist=list(instance.current_checklist),
                         sessions=[self._session(s) for s in instance.prior_interactions])
            if instance.extra.get("metadata"):
                entry["metadata"] = instance.extra["metadata"]
        self._instance_index[instance_id] = len(self.instances)
        self.instances.append(entry)
        return self._instance_index[instance_id]

    def _run_details(self, run_index: int, run: Run) -> dict[int, dict[str, dict]]:
        """The run's instance pages' details in parts of PART instances (by the instance's
        index); the index rows and metrics are filled as it goes."""
        parts: dict[int, dict[str, dict]] = {}
        classified = load_error_types(run) if run.setting == "default" else None
        if classified is not None:
            self.classified[run_index] = classified
        for instance_id in run.ids():
            data = run.instances[instance_id]
            inst = self._instance(instance_id, data)
            known = self.data.get(instance_id)
            detail = parts.setdefault(inst // PART, {})[str(inst)] = instance_detail(
                data, list(known.current_checklist) if known else None)
            case = classified.step(instance_id) if classified is not None else None
            if case is not None:  # apart from the steps: not part of the result's tokens, cost or failures
                detail["error_classification"] = {**trim_step(case), "scorer": classified.sample["scorer"],
                                                  "classifier": classified.sample["classifier"]}
            tokens, cost, failed, unpriced, flagged = 0, None, [], [], []
            for name, step in _all_steps(detail):  # trimmed steps carry their cost
                usage = step.get("usage") or {}
                tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
                step_cost = step.get("cost")
                if step_cost is not None:
                    cost = (cost or 0.0) + step_cost
                elif usage and name not in unpriced:
                    unpriced.append(name)
                if step.get("status") == "failed" and name not in failed:
                    failed.append(name)
                if step.get("flagged") and step.get("status") == "done":
                    flagged.append(f"{name}: {step['flagged']}")
            self.rows["inst"].append(inst)
            self.rows["run"].append(run_index)
            self.rows["tok"].append(tokens)
            self.rows["cost"].append(None if cost is None else round(cost, 6))
            self.rows["fail"].append(failed or 0)
            self.rows["flag"].append(flagged or 0)
            self.rows["unpriced"].append(unpriced or 0)
            for metrics, scorer in zip(self.metrics, self.scorers):
                evaluation = detail["evaluations"].get(scorer) or {}
                inference = evaluation.get("inference") if isinstance(evaluation.get("inference"), dict) else {}
                generation = evaluation.get("generation") if isinstance(evaluation.get("generation"), dict) else {}
                for key, value in (("p", inference.get("precision")), ("r", inference.get("recall")),
                                   ("f1", inference.get("f1")), ("j", generation.get("score"))):
                    metrics[key].append(_num(value))
        return parts

    def primary(self, task: str) -> int | None:
        """The page's index of the summary's primary scorer (the plain evaluator most runs have)."""
        scorer = self.analysis.primary_scorer(task)
        return None if scorer is None else self.scorers.index(scorer)

    def index(self, notes: list[str], title: str) -> dict:
        compare = paired_entries(self.analysis, self.runs, self.scorers)
        worst = {}
        for key, task in (("f1", "inference"), ("j", "generation")):
            scorer = self.primary(task)
            if scorer is not None:
                worst[key] = {"scorer": scorer, "rows": self.worst(key, scorer)}
        return {"title": title, "notes": notes, "compare": compare, "worst": worst, "part": PART,
                "session_part": SESSION_PART, "page_parts": PAGE_PARTS,
                "runs": [{"model": r.model, "label": self.analysis.label(r.model), "setting": r.setting,
                          "uses_labels": r.uses_labels, "scorers": [self.scorers.index(s) for s in r.scorers]}
                         for r in self.runs],
                "scorers": self.scorers,
                "primary": {"inference": self.primary("inference"), "generation": self.primary("generation")},
                "instances": self.instances, "rows": self.rows, "metrics": self.metrics}

    def worst(self, key: str, scorer: int, n: int = 10) -> list[int]:
        """The rows of the lowest values; equal values go round the runs (each run's lowest
        before any run's second lowest), so ties do not all come from the first run."""
        values = self.metrics[scorer][key]
        runs = self.rows["run"]
        rank: dict[int, int] = {}
        seen: dict[tuple, int] = {}
        for i in sorted((i for i, v in enumerate(values) if v is not None), key=lambda i: (values[i], i)):
            group = (runs[i], values[i])
            rank[i] = seen.get(group, 0)
            seen[group] = rank[i] + 1
        return sorted(rank, key=lambda i: (values[i], rank[i], runs[i], i))[:n]
