"""python -m synthesis.run: generate CUPID-style data (§3, Appendix B).

    python -m synthesis.run --output_dir synthetic_data --model claude-3-5-sonnet-20241022 \\
        --n_personas 10 --n_factors 8 --n_sessions 13 --max_turns 16 --n_workers 4

Seeds come from PersonaHub (proj-persona/PersonaHub, config `instruction`) unless
``--persona_seeds FILE`` (or ``--persona_seeds bundled`` for the small list shipped in
synthesis/data/) is given; an unreachable hub falls back to the bundled list with a message.
The output directory is read as it is by ``python -m evaluation.run --data_dir DIR``.
A rerun with the same settings continues where the last one stopped. Exit status: 0 when
every persona produced its instances, 1 when any persona failed, 2 on a setup error or when
another run is writing to the output directory (one line names it and that run's pid and host;
nothing is asked: wait for it to end or use another --output_dir; a run that was killed
never holds the directory), 3 when
the file system refused a write (disk full, read-only, permission denied, a path component
that is a file: one line names the file; every file written before it is whole, and a rerun
with room resumes there), 130 (143, 129) when stopped by Ctrl-C (SIGTERM, SIGHUP).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path


ROLE_FLAGS = ("model", "user_model", "assistant_model", "decomposer_model")


def build_parser() -> argparse.ArgumentParser:
    from cupid import config
    from cupid.synthesis.journey import MIN_SESSIONS
    from cupid.synthesis.pipeline import SynthesisConfig
    from cupid.utils.command_line import Parser, non_negative_int, positive_int, program_name

    d = SynthesisConfig()
    p = Parser(prog=program_name("python -m synthesis.run"), description=__doc__.split("\n\n")[0],
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
    p.add_argument("--log_file", default=None, help="also write the log to this file")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bars")
    from cupid.synthesis.dry_run import add_arguments

    add_arguments(p)
    return p


def setup_logging(log_file: str | None) -> None:
    """Raises StorageError when the log file cannot be opened (before anything is run)."""
    from cupid.utils.io import open_log_file

    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:  # a write refused later is one warning; the run goes on without the log
        handlers.append(open_log_file(log_file))
    # Our own messages at INFO; libraries (HTTP clients log every request) at WARNING.
    from cupid.utils.redact import RedactingFormatter

    formatter = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in handlers:  # no key reaches the console or the log file
        handler.setFormatter(formatter)
    from cupid.utils.models.cache import PRINTED

    handlers[0].addFilter(lambda record: not getattr(record, PRINTED, False))  # printed once already
    logging.basicConfig(level=logging.WARNING, handlers=handlers, force=True)
    # "cupid" holds the model layer's retries and failures.
    for ours in ("synthesis", "evaluation", "cupid"):
        logging.getLogger(ours).setLevel(logging.INFO)


def role_models(args: argparse.Namespace) -> dict[str, str]:
    """The model of each role: its own flag, else --all_models (or --embedded), else the
    release's default."""
    from cupid import config
    from cupid.synthesis.pipeline import SynthesisConfig

    every = config.EMBEDDED_MODEL if args.embedded else args.all_models
    defaults = SynthesisConfig()
    # The user simulator and the decomposer follow --model unless named (None), as in the release.
    fallback = {"model": defaults.model, "assistant_model": defaults.assistant_model,
                "user_model": None, "decomposer_model": None}
    return {role: getattr(args, role, None) or every or fallback[role] for role in ROLE_FLAGS}


def synthesis_config(args: argparse.Namespace):
    """The SynthesisConfig of parsed flags (the command line's, or synthesize()'s)."""
    from cupid.synthesis.pipeline import SynthesisConfig

    if args.embedded and args.persona_seeds is None:
        args.persona_seeds = "bundled"
    return SynthesisConfig(
        output_dir=Path(args.output_dir), **role_models(args),
        n_personas=args.n_personas, n_factors=args.n_factors, n_sessions=args.n_sessions,
        max_turns=args.max_turns, n_workers=args.n_workers, seed=args.seed,
        persona_seeds=args.persona_seeds, persona_batch_size=args.persona_batch_size,
        max_attempts=args.max_regenerations + 1,
        show_progress=False if args.no_progress else None, batch=args.batch,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.embedded and args.all_models:
        parser.error("give --embedded or --all_models, not both")
    from cupid.utils.io import STORAGE_EXIT, StorageError, check_writable

    try:
        setup_logging(args.log_file)
    except StorageError as exc:
        storage_error(exc, "nothing was run; choose a log file where you can write, or none")
        return STORAGE_EXIT
    log = logging.getLogger("synthesis")
    from cupid.utils.models.model import ModelConfigurationError
    from cupid.synthesis.pipeline import OutputDirInUse, SettingsError, run_synthesis
    from cupid.synthesis.personas import SeedSourceError

    cfg = synthesis_config(args)
    if args.json and not args.dry_run:
        parser.error("--json goes with --dry_run")
    if args.dry_run:
        from cupid.synthesis import dry_run

        return dry_run.main(cfg, args.rate_limit, as_json=args.json)
    try:
        from cupid.utils.models.limits import parse_rate_limit, set_user_limits

        set_user_limits(dict(parse_rate_limit(spec) for spec in args.rate_limit))
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    from cupid.utils.io import clean_orphan_tmp

    from cupid.utils.stop_signals import SignalGuard, stop_cause, stop_status

    try:
        check_writable(cfg.output_dir)  # before any model is made or called
    except StorageError as exc:
        storage_error(exc, f"nothing was run and nothing in {cfg.output_dir} was changed; choose "
                           f"an --output_dir where you can write (or make this one writable) and "
                           f"rerun")
        return STORAGE_EXIT
    clean_orphan_tmp(cfg.output_dir)  # left by a writer killed mid-write
    try:
        with SignalGuard():  # SIGTERM and SIGHUP handled as Ctrl-C while the run lasts
            cfg.check()
            summary = run_synthesis(cfg)
    except (ModelConfigurationError, SettingsError, SeedSourceError) as exc:
        log.error("%s", exc)
        return 2
    except OutputDirInUse as exc:
        print(f"error: {exc.output_dir} is in use by {exc.who()}: nothing was asked; wait for "
              f"it to end (then rerun to resume), or give another --output_dir", file=sys.stderr,
              flush=True)
        return 2
    except StorageError as exc:
        storage_error(exc, f"every file written before it in {cfg.output_dir} is whole (each is "
                           f"written at once or not at all)"
                           + (f", the submitted batches are listed in {cfg.output_dir / 'batches.json'}"
                              if cfg.batch else "")
                           + f"; {remedy(exc)} and rerun the same command: it resumes there "
                             f"without asking finished calls again")
        return STORAGE_EXIT
    except KeyboardInterrupt as exc:
        print(f"\n{stop_cause(exc)}: every finished file is kept in {cfg.output_dir}"
              + (f" (what was done so far: {cfg.output_dir / 'summary.json'})"
                 if getattr(exc, "summary_written", False) else "")
              + (f"; the submitted batches are listed in {cfg.output_dir / 'batches.json'}"
                 if cfg.batch else "")
              + "; rerun the same command to resume.", file=sys.stderr)
        return stop_status(exc)
    counts = summary["counts"]
    log.info("seeds: %s", summary["seed_source"])
    log.info("personas: %d requested, %d complete, %d failed; sessions %d, dialogues %d "
             "(%d satisfied), instances %d; regenerations %d; %.1f s",
             counts["personas_requested"], counts["personas_complete"], counts["personas_failed"],
             counts["sessions"], counts["dialogues"], counts["dialogues_satisfied"],
             counts["instances"], summary["regenerations"]["total"], summary["wall_time_s"])
    for role, usage in summary["usage"].items():
        cost = usage.get("estimated_cost_usd")
        log.info("%s: %s · %d calls (%d in batches, %d cached, %d retries, %d failed) · "
                 "%d+%d tokens%s", role, usage["model"], usage.get("calls", 0),
                 usage.get("batch_calls", 0), usage.get("cache_hits", 0), usage.get("retries", 0),
                 usage.get("failed_calls", 0), usage.get("prompt_tokens", 0),
                 usage.get("completion_tokens", 0), f" · ~${cost:.4f}" if cost is not None else "")
    if "batch" in summary:
        b = summary["batch"]
        log.info("batch mode: %d round(s), %d request(s) submitted by this invocation (%d again), "
                 "%d answered, %d failed in their batch, %d batch(es) resumed, %d lost; batch ids "
                 "in %s", b["rounds"], b["submitted_requests"], b["items_resubmitted"],
                 b["items_answered"], b["items_failed"], b["batches_resumed"], b["batches_lost"],
                 b["batches_file"])
    for failure in summary["failures"]:
        log.error("FAILED %s at %s: %s", failure["persona_id"], failure["stage"], failure["reason"])
    print(json.dumps({"summary": str(Path(args.output_dir) / "summary.json"), **counts}))
    return 1 if summary["failures"] else 0


def remedy(exc: OSError) -> str:
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "make the directory writable"
    return "make the path a writable directory again"


def storage_error(exc: OSError, safe: str) -> None:
    """The file system refused a write: one line naming the file and the operation, one
    saying what is safe and what to do; no traceback."""
    from cupid.utils.redact import redact

    print(redact(f"error: {exc}\nsafe: {safe}."), file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:  # after the run's handlers were put back
        from cupid.utils.stop_signals import stop_status

        sys.exit(stop_status(exc))
