"""``cupid-validate`` (``python -m cupid.synthesis.validation.cli``; from the checkout also ``python -m
synthesis.validate``): the paper's validation (§3.2, Appendix E) of a data directory.

    cupid-validate --data_dir synthetic_data --output_dir validated --model gpt-4o-2024-11-20 --n_workers 4
    cupid-validate --data_dir synthetic_data --output_dir validated --annotations a.json b.json

The flags are ``validate()``'s arguments (synthesis/validation/engine.py). Exit status: 0 when every
instance has its verdicts, 1 when an extraction failed (its instances' verdicts are unknown;
rerun to ask it again), 2 for bad input or setup, 3 when the file system refused a write,
130 (143, 129) when stopped by Ctrl-C (SIGTERM, SIGHUP): rerun the same command to resume.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import types
from pathlib import Path

from ... import config

# One extraction's answer per checklist entry (analysis, fragments, rating), in tokens.
ANSWER_TOKENS_PER_ENTRY = 150
ASSUMPTIONS = (f"an extraction answers {ANSWER_TOKENS_PER_ENTRY} tokens per checklist entry",
               "a preference without a recorded checklist is decomposed (80 tokens, 3 entries)",
               "every answer is usable at the first attempt")


class _CallableCommand(types.ModuleType):
    """Once this module is imported, the import system binds it as the package's attribute
    ``validate``, hiding the engine that ``from cupid.synthesis import validate`` documents;
    so calling the module calls the engine."""

    def __call__(self, *args, **kwargs):
        from .engine import validate

        return validate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableCommand


def build_parser() -> argparse.ArgumentParser:
    from .engine import DEFAULT_VALIDATOR
    from ...utils.command_line import Parser, non_negative_int, positive_float, positive_int, program_name

    p = Parser(prog=program_name("python -m cupid.synthesis.validation.cli"), description=__doc__.split("\n\n")[0],
               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data_dir", required=True,
                   help="instances to validate: a synthesis output, the benchmark's files, any path cupid-eval reads")
    p.add_argument("--output_dir", default="validation", help="where validation.jsonl, verified/ and summary.json go")
    p.add_argument("--model", default=DEFAULT_VALIDATOR, help="the validator (Appendix E: gpt-4o-2024-11-20, temperature 0)")
    p.add_argument("--n_workers", type=positive_int, default=4, help="instances validated at once (threads)")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N instances")
    p.add_argument("--annotations", nargs="+", default=(), metavar="FILE.json",
                   help="annotators' answer files saved from the annotation pages: an entry is expressed when "
                        "at least one annotator marks it so")
    p.add_argument("--tasks_per_page", type=positive_int, default=16, help="annotation tasks per page (the paper's 16)")
    p.add_argument("--timeout", type=positive_float, default=config.REQUEST_TIMEOUT, help="seconds a request may take")
    p.add_argument("--max_retries", type=non_negative_int, default=config.MAX_RETRIES,
                   help="retries of a request after 429/5xx/timeouts")
    p.add_argument("--no_cache", action="store_true", help="keep no response cache in OUTPUT_DIR/.llm_cache/")
    p.add_argument("--batch", action="store_true", help="ask through the provider's batch API at half price, in rounds")
    p.add_argument("--rate_limit", action="append", default=[], metavar="[MODEL=]tpm=N,rpm=N",
                   help="limits to keep on an endpoint; repeatable")
    p.add_argument("--log_file", default=None, help="also write the log to this file")
    p.add_argument("--dry_run", action="store_true", help="print the calls, tokens and cost, sending nothing")
    p.add_argument("--json", action="store_true", help="with --dry_run: the forecast as JSON on the last line")
    return p


def forecast(args) -> dict:
    """The requests the validation would send that no earlier run answered, rendered by
    the steps' own code with a stand-in model."""
    from ...evaluation.data import InstanceSource
    from ...evaluation.steps import decompose
    from . import fragments
    from .engine import AnswerStore, series_of
    from .plan import known_checklists, plan_checks, session_at
    from ...utils.forecast import RenderOnly, filler, parse_limits, render, role_forecast, summary
    from ...utils.models.registry import resolve_model

    model = resolve_model(args.model, role="evaluator")
    source = InstanceSource(data_path=args.data_dir, limit=args.limit)
    source.validate()
    instances = list(source)
    store, stand_in = AnswerStore(Path(args.output_dir) / "answers", model), RenderOnly(model)
    role, seen = role_forecast("validator", model), set()
    book = known_checklists(Path(args.data_dir), instances)
    series = series_of(source, instances)
    for instance in instances:
        for check in plan_checks(instance, series.get(instance.persona_id))[0]:
            known = book.get((instance.persona_id, check.preference.strip()))
            checklist = known[0] if known else [f"Does the response {filler(12, 'check')}?"] * 3
            asks = [] if known else [("checklists", decompose.ask(check.preference), 80)]
            asks += [("extractions", fragments.ask(checklist, session_at(instance, p)),
                      ANSWER_TOKENS_PER_ENTRY * len(checklist)) for p in check.positions]
            for kind, ask, tokens in asks:
                key = store.key(ask)
                if key in seen or (store.stored(kind, ask, lambda o: None) or {}).get("status") == "done":
                    continue
                seen.add(key)
                role.add_request(kind, render(lambda a=ask: a.answer(stand_in)), tokens)
    return {"dry_run": True, **summary([role], parse_limits(args.rate_limit)), "assumptions": list(ASSUMPTIONS)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .engine import validate
    from ...utils.command_line import print_error
    from ...utils.errors import CupidError, Interrupted
    from ...utils.forecast import print_forecast

    try:
        if args.dry_run:
            result = forecast(args)
            print_forecast(result, [f"dry run: nothing sent, nothing written; {args.data_dir} into {args.output_dir}"],
                           "rendered by the steps' code (stand-in checklists where a decomposition is needed)",
                           ASSUMPTIONS, as_json=args.json)
            return 0
        result = validate(**{name: getattr(args, name) for name in inspect.signature(validate).parameters})
    except (Interrupted, CupidError) as exc:
        return print_error(exc)
    print_summary(result.summary)
    print(json.dumps({"summary": str(Path(args.output_dir) / "summary.json"), **result.summary["counts"]}))
    return 1 if result.summary["counts"]["instances_unknown"] else 0


def print_summary(summary: dict, out=None) -> None:
    pct = lambda v: "n/a" if v is None else f"{v:.1f}%"  # noqa: E731
    c = summary["counts"]
    lines = [f"{c['instances']} instances: solvable {pct(summary['solvable_pct'])} ({c['solvable']}; "
             f"{c['solvable_unknown']} unknown), challenging {pct(summary['challenging_pct'])} "
             f"({c['challenging']}; {c['challenging_unknown']} unknown); verified {c['verified']}",
             f"entries expressed {pct(summary['entries_expressed_pct'])} of {c['entries']} "
             f"({c['entries_failed']} failed); request entries stated {c['request_entries_stated']} of "
             f"{c['request_entries']}; fragments dropped (not in the user's messages) {c['fragments_dropped']}",
             "implicitness ratings (1 explicit .. 7 implicit): " + ", ".join(
                 f"{k}: {v}" for k, v in summary["rating_distribution"].items()),
             f"extractions failed {c['extractions_failed']} (rerun to ask them again)"]
    if "human" in summary:
        h = summary["human"]
        rules = h["revision_rules"]
        lines.append(f"annotations: {h['annotators']} annotators, alpha {h['alpha_entries']} (entries), "
                     f"LLM-human agreement {pct(h['llm_human_agreement_pct'])} on {h['entries_annotated']} "
                     f"entries; instances to revise: {rules['section_3_2']['instances']} by §3.2's rule (expressed "
                     f"if marked by at least one annotator), {rules['appendix_e']['instances']} by Appendix E's "
                     f"(revised where at least one annotator marked an entry not expressed)")
    print("\n".join(lines), file=out or sys.stderr)


def console() -> None:
    """The console script ``cupid-validate``."""
    from ...utils.command_line import run_console

    run_console(main)


if __name__ == "__main__":
    console()
