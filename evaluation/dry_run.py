"""``python -m evaluation.run ... --dry_run``: what a run would cost, before paying for it.

Nothing is sent (no request, no pre-flight probe, no key needed) and nothing is written.
For every instance the run would evaluate, the run's own chains (evaluation/pipeline.py)
render every request with the steps' own code (evaluation/steps/, with utils/forecast.py's
``RenderOnly`` model); a step that depends on earlier answers (decompose, match, judge, and in
the summary setting infer and generate) is given stand-ins of the answers it would receive,
taken from the instance itself (``ASSUMPTIONS``). Steps an earlier run
already finished in the run directory cost nothing (read, never written). Re-asks of
unparseable answers are not counted.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from statistics import median

from .. import config
from . import paper_shape, steps
from .chains import AnswerlessAsker, scorer_name
from .run_spec import RunSpec
from .steps import summarize
from .steps.ask import Ask
from .steps.layouts import format_session_log
from .session_recall import recorded_selection
from .shards import ShardedInstances
from .store import RunStore, instance_file_name, run_dir_for, step_record
from .strategy_model import ANSWER_TOKENS, ForecastingModel
from ..utils.dataset import DataValidationError, Instance
from ..utils.errors import CupidError
from ..utils.forecast import (TOKEN_COUNTING, RenderOnly, RoleForecast, filler, parse_limits, print_forecast,
                              recorded_reasoning, render, role_forecast, summary)
from ..utils.io import read_json
from ..utils.models.tokens import estimate_tokens

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
STRATEGY_ASSUMPTION = (f"an LLM-backed strategy's model answers each of its calls with its answer_tokens "
                       f"(default {ANSWER_TOKENS}) tokens; its calls answered in the response cache are counted too")
# --task interaction: how many rounds a dialogue takes, and the simulator's answers.
SIMULATOR_FIXED_TOKENS = 150         # its headings, selected items and thinking
SIMULATOR_TOKENS_PER_ENTRY = 60      # its evaluation of one checklist entry
INTERACTION_ASSUMPTIONS = (
    "interaction: a dialogue takes as many replies as the instance's prior sessions took on average "
    "(their assistant turns: synthesis's simulator ended each when satisfied), at least 1 and at most "
    "--max_rounds; every reply is scored by the simulator",
    "interaction: every reply is as long as a generated response (above); the simulator writes "
    f"{SIMULATOR_TOKENS_PER_ENTRY} tokens per checklist entry plus {SIMULATOR_FIXED_TOKENS}, and its "
    "feedback is as long as the median later user turn of the instance's sessions",
    "interaction: a dialogue begun in the run directory is forecast whole; a finished one costs nothing",
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
    data_note: str | None = None  # the data forecast on, when it is not the run's own


def main(runs: list[dict], *, as_json: bool) -> int:
    """Forecast every run (``evaluate()``'s arguments: one, or a sweep's); print the table and,
    with ``as_json``, one JSON object on the last line. Returns the exit status (2 on bad
    input, as a run would)."""
    try:
        limits = parse_limits(runs[0].get("rate_limit") or [])
        specs = [RunSpec(**run) for run in runs]
        forecasts = [forecast_run(spec) for spec in specs]
        defaults: dict[str, RunForecast] = {}  # model -> its default setting's forecast
        contexts = [context_vs_default(spec, f, defaults, limits) for spec, f in zip(specs, forecasts)]
    except (CupidError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    roles: dict[str, RoleForecast] = {}
    for forecast in forecasts:
        merge_roles(roles, forecast.roles)
    result = {"dry_run": True, **summary(list(roles.values()), limits)}
    result["runs"] = [{"model": f.model, "setting": f.setting, "run_dir": f.run_dir,
                       "instances": f.instances, "skipped": f.skipped, "steps_already_done": f.steps_done,
                       **summary(list(f.roles.values()), limits), "context_vs_default": c,
                       **({"data": paper_shape.NAME, "data_note": f.data_note} if f.data_note else {})}
                      for f, c in zip(forecasts, contexts)]
    result["token_counting"] = TOKEN_COUNTING
    header = ["dry run: no request sent, nothing written"]
    for f, c in zip(forecasts, contexts):
        header.append(f"  {f.model} [{f.setting}] -> {f.run_dir}: {f.instances} instances"
                      + (f", {f.skipped} skipped (no relevant session)" if f.skipped else "")
                      + (f", {f.steps_done} steps already done (not counted)" if f.steps_done else ""))
        if f.data_note:
            header.append(f"    {f.data_note}")
        if c is not None:
            header.append(context_line(c))
    assumptions = (ASSUMPTIONS + ((STRATEGY_ASSUMPTION,) if any(s.strategy.uses_model for s in specs) else ())
                   + (INTERACTION_ASSUMPTIONS if any(s.task == "interaction" for s in specs) else ()))
    result["assumptions"] = list(assumptions)
    print_forecast(result, header, "rendered by the steps' code from the data: infer, generate (summary "
                   "setting: summarize); the other steps are rendered with stand-in answers",
                   assumptions, as_json=as_json)
    return 0


def merge_roles(roles: dict[str, RoleForecast], parts: dict[str, RoleForecast], prefix: str = "") -> None:
    """A run's role forecasts added into ``roles``: one row per role (``prefix`` + role) and model."""
    for role, part in parts.items():
        key = prefix + role
        if key in roles and roles[key].model != part.model:
            key = f"{key} ({part.model})"
        roles.setdefault(key, RoleForecast(key, part.model, part.batchable)).merge(part)


def context_vs_default(spec: RunSpec, forecast: RunForecast, defaults: dict[str, RunForecast],
                       limits: dict) -> dict | None:
    """What a context strategy's history costs against the default setting's (all eight
    sessions): the evaluated model's input tokens per instance and the whole run's cost, both
    for a run from scratch (steps already done counted too). ``defaults`` keeps each model's
    default-setting forecast."""
    if spec.strategy.name == "default" or spec.strategy.preference_given:
        return None
    mine = forecast if forecast.steps_done == 0 else forecast_run(spec, fresh=True)
    if forecast.model not in defaults:
        default = dataclasses.replace(spec, setting="default", strategy_model=None)
        defaults[forecast.model] = forecast_run(default, fresh=True)
    out = {}
    for key, f in (("", mine), ("default_", defaults[forecast.model])):
        model = f.roles["model"]
        out[f"{key}model_input_tokens_per_instance"] = round(model.input_tokens / max(1, f.instances - f.skipped))
        out[f"{key}cost_usd"] = summary(list(f.roles.values()), limits)["total"]["cost_usd"]
    out["input_tokens_ratio"] = (round(out["model_input_tokens_per_instance"] /
                                       out["default_model_input_tokens_per_instance"], 4)
                                 if out["default_model_input_tokens_per_instance"] else None)
    out["cost_ratio"] = (round(out["cost_usd"] / out["default_cost_usd"], 4)
                         if out["cost_usd"] is not None and out["default_cost_usd"] else None)
    return out


def context_line(c: dict) -> str:
    tokens = (f"    vs default: {c['model_input_tokens_per_instance']:,} model input tokens per instance, "
              f"default {c['default_model_input_tokens_per_instance']:,}")
    if c["input_tokens_ratio"] is not None:
        tokens += f" ({100 * (c['input_tokens_ratio'] - 1):+.0f}%)"
    if c["cost_ratio"] is not None:
        tokens += (f"; a run from scratch ${c['cost_usd']:,.4f}, default ${c['default_cost_usd']:,.4f} "
                   f"({100 * (c['cost_ratio'] - 1):+.0f}%)")
    return tokens


def run_instances(spec: RunSpec) -> tuple[object, str | None]:
    """The run's instances, and None; or, when the hub dataset cannot be read (no network and no
    stored copy), the paper's shape of it (paper_shape.py) and a note saying so."""
    try:
        return spec.instances()[1], None
    except DataValidationError as exc:
        if spec.data is not None or spec.dataset != config.HF_DATASET:
            raise
        reason = str(exc).split("; ")[0]
        source = paper_shape.ShapeSource(limit=spec.limit)
        instances = ShardedInstances(source, *spec.shard) if spec.shard else source
        return instances, (f"forecast on {paper_shape.NAME}, {len(source)} instances of its statistics' "
                           f"lengths, not on its data: the hub could not be read ({reason})")


def forecast_run(spec: RunSpec, fresh: bool = False) -> RunForecast:
    """``fresh``: as a run into an empty directory would (nothing done yet)."""
    if spec.task == "interaction":
        return forecast_interaction(spec, fresh)
    instances, shape_note = run_instances(spec)
    models = spec.resolve_models()
    model, evaluator = models["model"], models["evaluator"]
    matcher = models.get("matcher", evaluator)
    run_dir = run_dir_for(spec.results_dir, model.label, spec.strategy.name)
    forecast = RunForecast(model.label, spec.strategy.name, str(run_dir), data_note=shape_note)
    recorded = recorded_reasoning(run_dir)  # reasoning tokens an earlier run there recorded
    forecast.roles = {"model": role_forecast("model", model, recorded=recorded),
                      "evaluator": role_forecast("evaluator", evaluator, recorded=recorded)}
    if spec.use_matcher:  # PrefMatcher answers online in batch mode too
        forecast.roles["matcher"] = role_forecast("matcher", matcher, False, recorded)
    estimator = InstanceEstimator(spec, {"evaluated": RenderOnly(model), "evaluator": RenderOnly(evaluator),
                                         "matcher": RenderOnly(matcher)},
                                  scorer_name(evaluator, matcher), RunStore(run_dir, {}), forecast, fresh)
    if spec.strategy.uses_model:  # an LLM-backed strategy's calls: rendered, answered with stand-ins
        forecast.roles["strategy"] = role_forecast("strategy", models["strategy"], recorded=recorded)
        answer_tokens = int(getattr(spec.strategy.impl, "answer_tokens", ANSWER_TOKENS))
        spec.strategy.give_model(ForecastingModel(models["strategy"], estimator.count_strategy, answer_tokens))
    for instance in instances:
        forecast.instances += 1
        if not estimator.add(instance):
            forecast.skipped += 1
    return forecast


class InstanceEstimator(AnswerlessAsker):
    """The dry run's ``StepAsker`` (pipeline.py): runs the run's chains on one instance after
    another, adds each request not done yet in the run directory to the role forecasts, and
    answers with a stand-in of the answer it would get (``ASSUMPTIONS``)."""

    def __init__(self, spec: RunSpec, models: dict, scorer: str, store: RunStore, forecast: RunForecast,
                 fresh: bool = False):
        self.spec, self.setting, self.models, self.scorer, self.store = spec, spec.strategy, models, scorer, store
        self.forecast, self.fresh = forecast, fresh
        self.summarized: set[str] = set()
        self.instance: Instance | None = None
        self.record: dict = {}
        self.strategy_asked = True  # whether the run would ask the strategy for this instance

    def add(self, instance: Instance) -> bool:
        """False when the strategy skips the instance (oracle, no relevant session)."""
        self.instance, self.record = instance, self._record(instance)
        # A finished instance, or one whose file keeps what the strategy returned: not asked.
        self.strategy_asked = recorded_selection(self.record, len(instance.prior_interactions)) is None
        try:
            skipped = self.setting.skip_reason(instance)
        except Exception as exc:  # the strategy's own code (a user's) raised
            self.strategy_failed(instance, exc)
        if skipped or self.record.get("skipped"):
            return False
        self.walk(instance, self.spec.task, self.setting, self.spec.use_matcher)
        return True

    def _record(self, instance: Instance) -> dict:
        path = self.store.instance_path(instance.instance_id)
        if self.fresh or not path.is_file():
            return {}
        try:
            data = read_json(path)
        except (OSError, ValueError):
            return {}  # unreadable: the run would evaluate it afresh
        return data if isinstance(data, dict) and data.get("fingerprint") in (None, instance.fingerprint()) else {}

    def count_strategy(self, request, output_tokens: int) -> None:
        """One call of an LLM-backed strategy (strategy_model.py's ``ForecastingModel``)."""
        if self.strategy_asked:
            self.forecast.roles["strategy"].add_request("strategy", request, output_tokens)

    def done(self, step: steps.Step) -> bool:
        finished = step_record(self.record, step, self.scorer).get("status") == "done"
        self.forecast.steps_done += finished
        return finished

    def count(self, step: steps.Step, ask: Ask, output_tokens: int) -> None:
        role = "evaluator" if step.role == "matcher" and not self.spec.use_matcher else step.role
        model = self.models[role]
        self.forecast.roles["model" if role == "evaluated" else role].add_request(
            step.name, render(lambda: ask.answer(model)), output_tokens)

    def summaries(self, sessions) -> list[dict]:
        """The summary setting: each distinct session summarized once per run directory
        (as the pipeline shares them)."""
        summaries = []
        done = self.done(steps.SUMMARIZE)
        for session in sessions:
            bullets = [filler(SUMMARY_BULLET_TOKENS, "summary")] * (SUMMARY_BULLETS - 1)
            stand_in = {"context": [filler(SUMMARY_BULLET_TOKENS, "context")] + bullets,
                        "preferences": [session.contextual_preference] + bullets}
            summaries.append(stand_in)
            text = format_session_log([session])
            if done or text in self.summarized or (not self.fresh and self.store.summary_path(text).exists()):
                continue
            self.summarized.add(text)
            answer = _fenced({"summaries": [{"session_id": 1, "analysis": "", **stand_in}]})
            self.count(steps.SUMMARIZE, summarize.ask(session), estimate_tokens(answer) + SUMMARY_ANALYSIS_TOKENS)
        return summaries

    def __call__(self, step: steps.Step, ask: Ask) -> dict:
        truth, checklist = self.instance.current_contextual_preference, list(self.instance.current_checklist)
        if step is steps.INFER:  # an inferred preference as long as the truth
            output = {"preference": truth}
            tokens = estimate_tokens(f"### Analysis\n\n\n\n### Most Likely Preference\n\n{truth}") + ANALYSIS_TOKENS
        elif step is steps.DECOMPOSE:  # its checklist as long as the true one
            output, tokens = {"checklist": checklist}, estimate_tokens(_fenced({"checklist": checklist}))
        elif step is steps.GENERATE:
            response = typical_response(self.instance)
            output, tokens = {"response": response}, estimate_tokens(response)
        elif step is steps.JUDGE:
            output, tokens = {"score": 5}, JUDGE_FIXED_TOKENS + JUDGE_TOKENS_PER_ENTRY * len(checklist)
        else:  # a match: one labelled entry per checklist entry
            output = {"results": [{"score": 0.5} for _ in checklist]}
            tokens = estimate_tokens(_fenced({"results": [{"index": i, "entry": e, "label": "Partially Covered"}
                                                          for i, e in enumerate(checklist, start=1)]}))
        if not self.done(step):
            self.count(step, ask, tokens)
        return output


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


# ---------------------------------------------------------------------------------------
# --task interaction
# ---------------------------------------------------------------------------------------
def expected_rounds(instance: Instance, max_rounds: int) -> int:
    """The replies a dialogue is forecast to take (INTERACTION_ASSUMPTIONS)."""
    replies = [sum(t.role != "user" for t in s.dialogue) for s in instance.prior_interactions]
    mean = sum(replies) / len(replies) if replies else 1
    return max(1, min(max_rounds, round(mean)))


def forecast_interaction(spec: RunSpec, fresh: bool = False) -> RunForecast:
    """Each dialogue's calls, rendered by evaluation/interaction.py's own requests with
    stand-in replies and simulator answers, round after round as the chats grow."""
    from .interaction import first_ask, interaction_dir, persona_description
    from .interaction_run import resolve_simulator
    from .steps import generate, user_simulator
    from ..utils.models.reask import ask_until_usable

    instances, shape_note = run_instances(spec)
    models = spec.resolve_models()
    model, simulator = models["model"], resolve_simulator(spec)
    directory = interaction_dir(spec.results_dir, model.label, spec.strategy.name, simulator.label, spec.max_rounds)
    forecast = RunForecast(model.label, spec.strategy.name, str(directory))
    forecast.roles = {"model": role_forecast("model", model), "simulator": role_forecast("simulator", simulator)}
    if spec.judge_final:
        forecast.roles["evaluator"] = role_forecast("evaluator", models["evaluator"])
    as_model, as_simulator, as_judge = RenderOnly(model), RenderOnly(simulator), RenderOnly(models["evaluator"])
    for instance in instances:
        forecast.instances += 1
        if spec.strategy.skip_reason(instance):
            forecast.skipped += 1
            continue
        path = directory / instance_file_name(instance.instance_id)
        if not fresh and path.is_file():
            try:
                record = read_json(path)
            except (OSError, ValueError):
                record = {}
            if record.get("status") in ("satisfied", "unsatisfied", "skipped"):
                forecast.steps_done += len(record.get("rounds") or [])
                continue
        ask = first_ask(instance, spec.strategy)
        system, user_prompt = ask.render()
        chat = [{"role": "user", "content": user_prompt}]
        checklist = list(instance.current_checklist)
        sim_system = user_simulator.system_prompt(persona_description(instance)[0], instance.current_context_factor,
                                                  instance.current_contextual_preference, checklist)
        sim_chat = [{"role": "assistant", "content": user_simulator.opening_turn(instance.current_request.strip())}]
        reply, feedback = typical_response(instance), typical_feedback(instance)
        answer = filler(SIMULATOR_FIXED_TOKENS + SIMULATOR_TOKENS_PER_ENTRY * len(checklist), "evaluation") + feedback
        for number in range(1, expected_rounds(instance, spec.max_rounds) + 1):
            request = render(lambda: ask.answer(as_model)) if number == 1 else render(
                lambda: ask_until_usable(as_model, system, chat, generate.parse, tries=1))
            forecast.roles["model"].add_request("reply", request, estimate_tokens(reply))
            chat.append({"role": "assistant", "content": reply})
            sim_chat.append({"role": "user", "content": reply})
            request = render(lambda: user_simulator.ask(as_simulator, sim_system, sim_chat))
            forecast.roles["simulator"].add_request("simulator", request, estimate_tokens(answer))
            sim_chat.append({"role": "assistant", "content": answer})
            chat.append({"role": "user", "content": feedback})
        if spec.judge_final:  # the last reply, judged as the generation task's response
            step = steps.judge.ask(instance.current_contextual_preference, checklist, instance.current_request, reply)
            forecast.roles["evaluator"].add_request(steps.JUDGE.name, render(lambda: step.answer(as_judge)),
                                                    JUDGE_FIXED_TOKENS + JUDGE_TOKENS_PER_ENTRY * len(checklist))
    return forecast


def typical_feedback(instance: Instance) -> str:
    """The stand-in of the simulator's feedback: the median-length user turn after the first
    of the instance's sessions."""
    turns = sorted((t.content for s in instance.prior_interactions for t in s.dialogue[1:] if t.role == "user"),
                   key=len)
    return turns[len(turns) // 2] if turns else filler(40, "feedback")
