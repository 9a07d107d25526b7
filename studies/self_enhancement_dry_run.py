"""``cupid-self-enhancement --dry_run``: the whole experiment priced before it is paid for,
by composing both engines' dry runs (synthesis/dry_run.py for each model's data set,
evaluation/dry_run.py for every model on every data set). Nothing is sent and nothing is
written in the output directory: a data set's personas.json is seeded in a scratch copy, and
a data set not synthesized yet is priced on stand-in instances of the sizes the synthesis dry
run assumes.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..utils.dataset import INSTANCE_TYPES, make_instance_id, safe_name


def stand_in_rows(persona_id: str, n_sessions: int) -> list[dict]:
    """A persona's three instances as a synthesis would make them, of the sizes the
    synthesis dry run assumes (synthesis/dry_run.py): the evaluation's dry run prices a data
    set that does not exist yet on these."""
    from ..synthesis import dry_run as synthesis_dry_run
    from ..utils.forecast import filler

    s = synthesis_dry_run
    preference = filler(s.PREFERENCE_TOKENS, "preference")
    dialogue = [{"role": "user", "content": filler(s.REQUEST_TOKENS, "request")}]
    for _ in range(s.USER_TURNS):
        dialogue += [{"role": "assistant", "content": filler(s.ASSISTANT_REPLY_TOKENS, "reply")},
                     {"role": "user", "content": filler(s.USER_MESSAGE_TOKENS, "message")}]
    dialogue.append({"role": "assistant", "content": filler(s.ASSISTANT_REPLY_TOKENS, "reply")})
    session = {"context_factor": filler(8, "factor"), "contextual_preference": preference, "dialogue": dialogue}
    return [{"instance_id": make_instance_id(persona_id, kind), "persona_id": persona_id, "instance_type": kind,
             "current_request": filler(s.REQUEST_TOKENS, "request"), "current_context_factor": session["context_factor"],
             "current_contextual_preference": preference,
             "current_checklist": [f"Does the response {filler(s.CHECKLIST_TOKENS // 4 - 3, 'check')}?"] * 4,
             "prior_interactions": [session] * (n_sessions - 5)} for kind in INSTANCE_TYPES]


def dry_run(plan, as_json: bool) -> int:
    """Print the forecast of ``plan`` (a self_enhancement.Plan); 0, or BadInput."""
    from ..evaluation import dry_run as evaluation_dry_run
    from ..evaluation.run_spec import RunSpec
    from ..synthesis import dry_run as synthesis_dry_run
    from ..synthesis.api import synthesis_config
    from ..utils.forecast import RoleForecast, parse_limits, print_forecast, summary

    roles: dict[str, RoleForecast] = {}
    header = [f"dry run: no request sent, nothing written; {len(plan.personas)} personas, "
              f"{len(plan.models)} models, {len(plan.models) ** 2} evaluations, into {plan.out}"]
    stand_ins = 0
    with tempfile.TemporaryDirectory(prefix="cupid-self-enhancement-") as scratch:
        for spec in plan.models:
            if spec in plan.existing:
                header.append(f"  data set by {plan.models[spec][0]}: {plan.existing[spec]} (not synthesized)")
                continue
            directory = plan.data_dir(spec)
            if not (directory / "personas.json").exists():  # priced in a scratch copy, never in OUTPUT_DIR
                directory = Path(scratch) / "data" / safe_name(spec)
                directory.mkdir(parents=True)
                plan.seed_personas(directory)
            cfg = synthesis_config(**plan.synthesis_arguments(spec, directory))
            evaluation_dry_run.merge_roles(roles, synthesis_dry_run.forecast(cfg), "synthesis ")
            header.append(f"  data set by {plan.models[spec][0]}: synthesize {len(plan.personas)} personas into "
                          f"{plan.data_dir(spec)}")
        for dataset in plan.models:
            rows = plan.dataset_rows(dataset)
            have = {r["persona_id"] for r in rows}
            missing = [p["persona_id"] for p in plan.personas if p["persona_id"] not in have]
            stand_ins += len(missing)
            rows += [row for pid in missing for row in stand_in_rows(pid, plan.args.n_sessions)]
            path = Path(scratch) / f"{safe_name(dataset)}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            for spec in plan.models:
                arguments = plan.evaluation_arguments(spec, dataset, str(path))
                forecast = evaluation_dry_run.forecast_run(RunSpec(**arguments))
                evaluation_dry_run.merge_roles(roles, forecast.roles, "evaluation ")
                header.append(f"  evaluate {forecast.model} on the data set by {plan.models[dataset][0]}: "
                              f"{forecast.instances} instances"
                              + (f", {forecast.steps_done} steps already done" if forecast.steps_done else ""))
    assumptions = [*synthesis_dry_run.ASSUMPTIONS, *evaluation_dry_run.ASSUMPTIONS]
    if stand_ins:
        assumptions.append(f"the instances of {stand_ins} persona(s), over the data sets, not synthesized yet: priced on "
                           f"stand-in instances of those sizes ({plan.args.n_sessions - 5} prior sessions each)")
    # The limits were checked with every evaluation's arguments above.
    result = {"dry_run": True, **summary(list(roles.values()), parse_limits(plan.args.rate_limit)),
              "personas": [p["persona_id"] for p in plan.personas], "assumptions": assumptions}
    print_forecast(result, header, "rendered by each stage's and step's code; later stages and steps with "
                   "stand-in answers", assumptions, as_json=as_json)
    return 0
