"""``python -m evaluation.run ... --dry_run``: what a run would cost, before paying for it.

Nothing is sent (no request, no pre-flight probe, no key needed) and nothing is written.
For every instance the run would evaluate, the requests of the steps that depend only on the
data (summarize, infer, generate) are rendered by the steps' own code
(evaluation/steps.py, utils/benchmark/decomposer.py, with utils/forecast.py's ``RenderOnly`` model);
the steps that depend on earlier answers (decompose, match, judge, and in the summary
setting infer and generate) are rendered the same way with stand-ins of the answers they
would receive, taken from the instance itself (``ASSUMPTIONS``). Steps an earlier run
already finished in the run directory cost nothing (read, never written). Re-asks of
unparseable answers are not counted.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from statistics import median

from cupid import config
from cupid.evaluation import steps as S
from cupid.evaluation.flags import role_overrides
from cupid.evaluation.invocation import select_instances
from cupid.evaluation.prompt_layouts import format_session_log, relevant_positions
from cupid.evaluation.pipeline import scorer_name, select_sessions
from cupid.evaluation.store import RunStore, run_dir_for
from cupid.utils.benchmark.decomposer import decompose
from cupid.utils.benchmark.dataset import DataValidationError, Instance
from cupid.utils.forecast import (TOKEN_COUNTING, RenderOnly, RoleForecast, batchable, filler, parse_limits,
                           print_forecast, render, summary)
from cupid.utils.io import read_json
from cupid.utils.models.errors import ModelError
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.tokens import estimate_tokens

# Stand-ins for the answers the later steps are built from, and the answers' own lengths.
ANALYSIS_TOKENS = 150           # the "### Analysis" part of an inferred preference
RESPONSE_MIN_TOKENS = 400       # a generated response, at least
SUMMARY_ANALYSIS_TOKENS = 60    # a session summary's "analysis" field
SUMMARY_BULLETS = 3             # context bullets, and preference bullets, of a session summary
SUMMARY_BULLET_TOKENS = 30
JUDGE_TOKENS_PER_ENTRY = 50     # the judge's evaluation of one checklist entry
JUDGE_FIXED_TOKENS = 30         # the judge's headings and score
ASSUMPTIONS = (
    "the inferred preference is as long as the instance's true preference, after a "
    f"{ANALYSIS_TOKENS}-token analysis",
    "the decomposer's checklist of it has as many entries, as long, as the true checklist",
    "the matcher answers one labelled JSON entry per checklist entry",
    "a generated response is as long as the median assistant turn of the instance's sessions, "
    f"and at least {RESPONSE_MIN_TOKENS} tokens",
    f"the judge writes {JUDGE_TOKENS_PER_ENTRY} tokens per checklist entry plus {JUDGE_FIXED_TOKENS}",
    f"summary setting: a session's summary has {SUMMARY_BULLETS} context and {SUMMARY_BULLETS} "
    f"preference bullets of {SUMMARY_BULLET_TOKENS} tokens (the first preference bullet is the "
    f"session's preference), after a {SUMMARY_ANALYSIS_TOKENS}-token analysis",
    "every answer parses at the first attempt (no re-asks)",
)


@dataclass
class RunForecast:
    model: str
    setting: str
    run_dir: str
    instances: int = 0
    skipped: int = 0          # oracle setting: no relevant session
    steps_done: int = 0       # already finished in the run directory: cost nothing
    roles: dict[str, RoleForecast] = field(default_factory=dict)


def main(runs: list[argparse.Namespace], *, as_json: bool) -> int:
    """Forecast every run (one, or a sweep's); print the table and, with ``as_json``, one JSON
    object on the last line. Returns the exit status (2 on bad input, as a run would)."""
    try:
        limits = parse_limits(runs[0].rate_limit)
        forecasts = [forecast_run(run) for run in runs]
    except (DataValidationError, ModelError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    roles: dict[str, RoleForecast] = {}
    for forecast in forecasts:
        for role, part in forecast.roles.items():
            key = role if role not in roles or roles[role].model == part.model else f"{role} ({part.model})"
            roles.setdefault(key, RoleForecast(key, part.model, part.batchable)).merge(part)
    result = {"dry_run": True, **summary(list(roles.values()), limits)}
    result["runs"] = [{"model": f.model, "setting": f.setting, "run_dir": f.run_dir,
                       "instances": f.instances, "skipped": f.skipped, "steps_already_done": f.steps_done,
                       **summary(list(f.roles.values()), limits)} for f in forecasts]
    result["token_counting"] = TOKEN_COUNTING
    result["assumptions"] = list(ASSUMPTIONS)
    header = ["dry run: no request sent, nothing written"]
    for f in forecasts:
        header.append(f"  {f.model} [{f.setting}] -> {f.run_dir}: {f.instances} instances"
                      + (f", {f.skipped} skipped (no relevant session)" if f.skipped else "")
                      + (f", {f.steps_done} steps already done (not counted)" if f.steps_done else ""))
    print_forecast(result, header, "rendered by the steps' code from the data: infer, generate (summary "
                   "setting: summarize); the other steps are rendered with stand-in answers",
                   ASSUMPTIONS, as_json=as_json)
    return 0


def forecast_run(args: argparse.Namespace) -> RunForecast:
    if args.setting == "oracle_preference" and args.task != "generation":
        raise ValueError("--setting oracle_preference applies to --task generation only")
    _, instances = select_instances(args)
    common = {"timeout": args.timeout, "max_retries": args.max_retries}
    overrides = role_overrides(args)
    model = resolve_model(args.model, role="evaluated", overrides=overrides["evaluated"], **common)
    evaluator = resolve_model(args.evaluator, role="evaluator", overrides=overrides["evaluator"], **common)
    matcher = resolve_model(f"vllm:{config.PREFMATCHER_MODEL}@{args.matcher_url}", role="matcher",
                            overrides=overrides["matcher"], **common) if args.use_matcher else evaluator
    scorer = scorer_name(evaluator, matcher)
    run_dir = run_dir_for(args.results_dir, model.label, args.setting)
    forecast = RunForecast(model.label, args.setting, str(run_dir))
    roles = {"model": RoleForecast("model", model.name, batchable(model)),
             "evaluator": RoleForecast("evaluator", evaluator.name, batchable(evaluator))}
    if args.use_matcher:  # PrefMatcher answers online in batch mode too
        roles["matcher"] = RoleForecast("matcher", matcher.name, False)
    forecast.roles = roles
    estimator = InstanceEstimator(RenderOnly(model), RenderOnly(evaluator),
                                  RenderOnly(matcher) if args.use_matcher else None,
                                  args.task, args.setting, scorer, RunStore(run_dir, {}), roles)
    for instance in instances:
        forecast.instances += 1
        if not estimator.add(instance):
            forecast.skipped += 1
    forecast.steps_done = estimator.steps_done
    return forecast


class InstanceEstimator:
    """Adds one instance's calls to the role forecasts, step by step as the pipeline runs
    them (evaluation/pipeline.py), skipping the steps the run directory holds as done."""

    def __init__(self, model, evaluator, matcher, task: str, setting: str, scorer: str,
                 store: RunStore, roles: dict[str, RoleForecast]):
        self.model, self.evaluator, self.matcher = model, evaluator, matcher
        self.task, self.setting, self.scorer, self.store, self.roles = task, setting, scorer, store, roles
        self.summarized: set[str] = set()
        self.steps_done = 0

    def _record(self, instance: Instance) -> dict:
        path = self.store.instance_path(instance.instance_id)
        if not path.is_file():
            return {}
        try:
            data = read_json(path)
        except (OSError, ValueError):
            return {}  # unreadable: the run would evaluate it afresh
        return data if isinstance(data, dict) and data.get("fingerprint") in (None, instance.fingerprint()) else {}

    def _done(self, record: dict, name: str, scorer: str | None = None) -> bool:
        if scorer is None:
            steps = record.get("steps") or {}
        else:
            steps = ((record.get("evaluations") or {}).get(scorer) or {}).get("steps") or {}
        done = (steps.get(name) or {}).get("status") == "done"
        self.steps_done += done
        return done

    def add(self, instance: Instance) -> bool:
        """False when the setting skips the instance (oracle, no relevant session)."""
        if self.setting == "oracle" and not relevant_positions(instance):
            return False
        record = self._record(instance)
        if record.get("skipped"):
            return False
        truth, checklist = instance.current_contextual_preference, list(instance.current_checklist)
        history, from_summaries = "", False
        if self.setting == "summary":
            history, from_summaries = self._summaries(instance, record), True
        elif self.setting != "oracle_preference":
            history = format_session_log(select_sessions(instance, self.setting))
        request = instance.current_request
        if self.task in ("inference", "both"):
            inferred = truth  # stand-in of the same length (ASSUMPTIONS)
            if not self._done(record, "infer"):
                answer = f"### Analysis\n\n\n\n### Most Likely Preference\n\n{inferred}"
                self._add("model", "infer", lambda: S.infer_preference(
                    self.model, history, request, from_summaries=from_summaries),
                    estimate_tokens(answer) + ANALYSIS_TOKENS)
            if not self._done(record, "decompose", self.scorer):
                self._add("evaluator", "decompose", lambda: decompose(self.evaluator, inferred),
                          estimate_tokens(_fenced({"checklist": checklist})))
            matcher = self.matcher or self.evaluator
            role = "matcher" if self.matcher is not None else "evaluator"
            for name, preference, entries in (("match_precision", truth, checklist),
                                              ("match_recall", inferred, checklist)):
                if not self._done(record, name, self.scorer):
                    self._add(role, name, lambda p=preference, e=entries: S.match_checklist(
                        matcher, p, e, prefmatcher=self.matcher is not None),
                        estimate_tokens(_match_answer(entries)))
        if self.task in ("generation", "both"):
            response = typical_response(instance)
            if not self._done(record, "generate"):
                if self.setting == "oracle_preference":
                    call = lambda: S.generate_with_preference(self.model, truth, request)
                else:
                    call = lambda: S.generate_response(self.model, history, request,
                                                       from_summaries=from_summaries)
                self._add("model", "generate", call, estimate_tokens(response))
            if not self._done(record, "judge", self.scorer):
                self._add("evaluator", "judge", lambda: S.judge_response(
                    self.evaluator, truth, checklist, request, response),
                    JUDGE_FIXED_TOKENS + JUDGE_TOKENS_PER_ENTRY * len(checklist))
        return True

    def _add(self, role: str, step: str, call, output_tokens: int) -> None:
        self.roles[role].add_request(step, render(call), output_tokens)

    def _summaries(self, instance: Instance, record: dict) -> str:
        """The summary setting: each distinct session summarized once per run directory
        (as the pipeline shares them); returns the summaries' text the steps are given."""
        summaries = []
        done = self._done(record, "summarize")
        for session in instance.prior_interactions:
            bullets = [filler(SUMMARY_BULLET_TOKENS, "summary")] * (SUMMARY_BULLETS - 1)
            stand_in = {"context": [filler(SUMMARY_BULLET_TOKENS, "context")] + bullets,
                        "preferences": [session.contextual_preference] + bullets}
            summaries.append(stand_in)
            text = format_session_log([session])
            if done or text in self.summarized or self.store.summary_path(text).exists():
                continue
            self.summarized.add(text)
            answer = _fenced({"summaries": [{"session_id": 1, "analysis": "", **stand_in}]})
            self._add("model", "summarize", lambda s=session: S.summarize_session(self.model, s),
                      estimate_tokens(answer) + SUMMARY_ANALYSIS_TOKENS)
        return S.format_summaries(summaries)


def typical_response(instance: Instance) -> str:
    """The stand-in of a generated response: the median-length assistant turn of the
    instance's sessions, padded to RESPONSE_MIN_TOKENS."""
    turns = sorted((t.content for s in instance.prior_interactions for t in s.dialogue
                    if t.role != "user"), key=len)
    response = ""
    if turns:
        length = int(median(len(t) for t in turns))
        response = next(t for t in turns if len(t) >= length)
    missing = RESPONSE_MIN_TOKENS - estimate_tokens(response)
    return f"{response}\n\n{filler(missing, 'response')}".strip() if missing > 0 else response


def _fenced(value: dict) -> str:
    return "```json\n" + json.dumps(value, indent=2) + "\n```"


def _match_answer(entries: list[str]) -> str:
    return _fenced({"results": [{"index": i, "entry": e, "label": "Partially Covered"}
                                for i, e in enumerate(entries, start=1)]})
