"""``cupid-synth`` (``python -m cupid.synthesis.run``): generate CUPID-style data (§3, Appendix B).

    cupid-synth --output_dir synthetic_data --model claude-3-5-sonnet-20241022 \\
        --n_personas 10 --n_factors 8 --n_sessions 13 --max_turns 16 --n_workers 4

Seeds come from PersonaHub (proj-persona/PersonaHub, config `instruction`) unless
``--persona_seeds FILE`` (or ``--persona_seeds bundled`` for the small list shipped in
synthesis/data/) is given; an unreachable hub falls back to the bundled list with a message.
The flags are ``synthesize()``'s arguments (synthesis/api.py), which does the work. The output
directory is read as it is by ``cupid-eval --data_dir DIR``. A rerun with the same settings
continues where the last one stopped. Exit status: 0 when every persona produced its
instances, 1 when any persona failed, 2 on a setup error or an output directory in use, 3
when the file system refused a write, 130 (143, 129) when stopped by Ctrl-C (SIGTERM,
SIGHUP); docs/synthesis.md says what each leaves behind.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..utils.redact import redact


ROLE_FLAGS = ("model", "user_model", "assistant_model", "decomposer_model")


def build_parser() -> argparse.ArgumentParser:
    from .. import config
    from .journey import MIN_SESSIONS
    from .options import SynthesisConfig
    from ..utils.command_line import Parser, non_negative_int, positive_int, program_name

    d = SynthesisConfig()
    p = Parser(prog=program_name("python -m cupid.synthesis.run"), description=__doc__.split("\n\n")[0],
               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--output_dir", default=str(d.output_dir), help="where every artifact is written")
    # Role flags have no default in the namespace so that --all_models / --embedded can tell an explicit choice.
    p.add_argument("--model", default=argparse.SUPPRESS,
                   help=f"personas, factors, sessions, checklists and the user simulator, as in "
                        f"the release; default {d.model}")
    p.add_argument("--user_model", default=argparse.SUPPRESS, help="user simulator (default: --model)")
    p.add_argument("--assistant_model", default=argparse.SUPPRESS,
                   help=f"assistant simulator (the release's fixed model); default {d.assistant_model}")
    p.add_argument("--decomposer_model", default=argparse.SUPPRESS,
                   help="preference decomposer, for the checklists (default: --model)")
    p.add_argument("--all_models", default=None, metavar="NAME",
                   help="one model in every role (a --*_model flag given beside it still wins)")
    p.add_argument("--embedded", action="store_true",
                   help=f"offline: {config.EMBEDDED_MODEL} in every role and the bundled persona "
                        f"seeds (same as --all_models {config.EMBEDDED_MODEL} --persona_seeds bundled)")
    p.add_argument("--n_personas", type=positive_int, default=d.n_personas,
                   help="personas to make; each gives three instances (consistent, contrastive, "
                        "changing). A rerun with more extends the directory")
    p.add_argument("--n_factors", type=positive_int, default=d.n_factors,
                   help="context factors per persona (at least 3), each with its own preference")
    p.add_argument("--n_sessions", type=positive_int, default=d.n_sessions,
                   help=f"sessions in each persona's journey (Appendix B.3): its instances' "
                        f"prior sessions and their current request; at least {MIN_SESSIONS}")
    p.add_argument("--max_turns", type=positive_int, default=d.max_turns,
                   help="most assistant-simulator replies in a dialogue (the release's count: "
                        "the user simulator speaks at most max_turns - 1 times)")
    p.add_argument("--n_workers", type=positive_int, default=d.n_workers, help="concurrent LLM calls (threads)")
    p.add_argument("--seed", type=non_negative_int, default=d.seed, help="seed of every random choice")
    p.add_argument("--persona_seeds", default=None, metavar="FILE|bundled",
                   help="seed descriptions (.jsonl/.json with an 'input persona' field, or .txt "
                        "one per line), or 'bundled'; default: PersonaHub via `datasets`")
    p.add_argument("--persona_batch_size", type=positive_int, default=d.persona_batch_size,
                   help="personas described per call (Figure 13)")
    p.add_argument("--max_regenerations", type=non_negative_int, default=d.max_attempts - 1,
                   help="re-asks of an invalid generation before its persona fails")
    p.add_argument("--batch", action="store_true",
                   help="the synthesizer's calls (descriptions, factors, sessions) through the "
                        "OpenAI, Anthropic, Together or Gemini batch API at half price, in rounds; "
                        "batch ids are kept in the output directory's batches.json, so a rerun "
                        "resumes them. The simulators and the decomposer answer online")
    p.add_argument("--rate_limit", action="append", default=[], metavar="[MODEL=]tpm=N,rpm=N",
                   help="limits to keep on an endpoint (all endpoints, or MODEL's) besides those the provider "
                        "states in its headers; --dry_run computes its time at them; repeatable")
    p.add_argument("--log_file", default=None, help="also write the log to this file")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bars")
    p.add_argument("--dry_run", action="store_true",
                   help="print what the synthesis would send and cost per role (calls, tokens, cost online and "
                        "with --batch, time at --rate_limit), without sending or writing anything")
    p.add_argument("--json", action="store_true",
                   help="with --dry_run: also print the forecast as one JSON object on the last line")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and not args.dry_run:
        parser.error("--json goes with --dry_run")
    from .api import synthesis_config, synthesize
    from ..utils.command_line import print_error
    from ..utils.errors import CupidError, Interrupted

    arguments = {name: getattr(args, name, None) for name in ARGUMENTS}
    try:
        if args.dry_run:
            from . import dry_run

            arguments.pop("rate_limit"), arguments.pop("log_file")
            return dry_run.main(synthesis_config(**arguments), args.rate_limit, as_json=args.json)
        result = synthesize(**arguments)
    except (Interrupted, CupidError) as exc:
        return print_error(exc)
    print_summary(result.summary)
    print(json.dumps({"summary": str(Path(args.output_dir) / "summary.json"), **result.summary["counts"]}))
    return 1 if result.failures else 0


# The flags that are synthesize()'s arguments (the role flags are None unless given).
ARGUMENTS = ("output_dir", *ROLE_FLAGS, "all_models", "embedded", "n_personas", "n_factors", "n_sessions",
             "max_turns", "n_workers", "seed", "persona_seeds", "persona_batch_size", "max_regenerations",
             "batch", "rate_limit", "log_file", "no_progress")


def print_summary(summary: dict) -> None:
    counts = summary["counts"]
    lines = [f"seeds: {summary['seed_source']}",
             f"personas: {counts['personas_requested']} requested, {counts['personas_complete']} complete, "
             f"{counts['personas_failed']} failed; sessions {counts['sessions']}, dialogues {counts['dialogues']} "
             f"({counts['dialogues_satisfied']} satisfied), instances {counts['instances']}; regenerations "
             f"{summary['regenerations']['total']}; {summary['wall_time_s']:.1f} s"]
    for role, usage in summary["usage"].items():
        cost = usage.get("estimated_cost_usd")
        lines.append(f"{role}: {usage['model']} · {usage.get('calls', 0)} calls ({usage.get('batch_calls', 0)} in "
                     f"batches, {usage.get('cache_hits', 0)} cached, {usage.get('retries', 0)} retries, "
                     f"{usage.get('failed_calls', 0)} failed) · {usage.get('prompt_tokens', 0)}+"
                     f"{usage.get('completion_tokens', 0)} tokens" + (f" · ~${cost:.4f}" if cost is not None else ""))
    if "batch" in summary:
        b = summary["batch"]
        lines.append(f"batch mode: {b['rounds']} round(s), {b['submitted_requests']} request(s) submitted by this "
                     f"invocation ({b['items_resubmitted']} again), {b['items_answered']} answered, "
                     f"{b['items_failed']} failed in their batch, {b['batches_resumed']} batch(es) resumed, "
                     f"{b['batches_lost']} lost; batch ids in {b['batches_file']}")
    lines += [f"FAILED {f['persona_id']} at {f['stage']}: {f['reason']}" for f in summary["failures"]]
    print(redact("\n".join(lines)), file=sys.stderr)


def console() -> None:
    """The console script ``cupid-synth``."""
    from ..utils.command_line import run_console

    run_console(main)


if __name__ == "__main__":
    console()
