"""``cupid-eval`` (``python -m cupid.evaluation.run``; from the checkout, ``python -m
evaluation.run``): evaluate a model on CUPID.

    cupid-eval --model gpt-4.1-nano-2025-04-14 --evaluator gpt-4o-2024-11-20 --n_workers 4
    cupid-eval --model smollm2-135m --evaluator smollm2-135m --data_dir data/sample

The flags are ``evaluate()``'s arguments (evaluation/api.py), which does the work; several
``--model``s or a ``--sweep`` file run one after another in this process. Exit status: 0 when
every instance was evaluated, 1 when any instance failed, 2 for bad input or setup (or a key
refused mid-run), 3 when the file system refused a results file, 130 (143, 129) when stopped
by Ctrl-C (SIGTERM, SIGHUP); docs/runs.md says what each leaves behind.
"""
from __future__ import annotations

import argparse
import re
import sys

from .. import config
from .console import print_interaction_summary, print_summary, print_sweep_table
from .run_spec import EVALUATION_TASKS
from ..utils.command_line import (Parser, generation_params, non_negative_int, positive_float, positive_int,
                                  print_error, program_name)
from ..utils.errors import BadInput, CupidError, Interrupted
from ..utils.executor import exit_now
from ..utils.io import STORAGE_EXIT
from ..utils.redact import redact
from ..utils.stop_signals import STOP_CODES, SignalGuard, stop_cause, stop_status


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=program_name("python -m cupid.evaluation.run"),
        description="Evaluate a model on CUPID: infer the user's contextual preference from "
                    "prior sessions (precision/recall/F1) and/or answer the request (judge score 1-10).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", nargs="+",
                   help="model(s) to evaluate, several for a sweep in one process (one run directory "
                        "each, one summary table at the end): a registered model_name (see utils/models/), a hosted "
                        "name (gpt-*/o1*/o3*/o4* → OpenAI, claude-* → Anthropic, gemini-* → Google, "
                        "org/name → Together), a prefixed name (openai:, anthropic:, together:, google:, "
                        "vllm:NAME[@URL], local-server:NAME[@URL]), or smollm2-135m (embedded, offline)")
    p.add_argument("--evaluator", default=config.DEFAULT_EVALUATOR,
                   help="model that decomposes the inferred preference, matches checklists (unless "
                        "--use_matcher) and judges responses; temperature 0")
    p.add_argument("--use_matcher", action="store_true",
                   help=f"match checklists with PrefMatcher-7B ({config.PREFMATCHER_MODEL}) served by an "
                        "OpenAI-compatible server (vLLM) instead of the evaluator")
    p.add_argument("--matcher_url", default=config.PREFMATCHER_BASE_URL,
                   help="base URL of the PrefMatcher server (also CUPID_PREFMATCHER_URL); several, "
                        "comma-separated (URL1,URL2), are asked round-robin")
    p.add_argument("--task", choices=EVALUATION_TASKS, default="inference",
                   help="inference: infer the preference; generation: answer the request; both; "
                        "interaction: answer the request, then the user simulator's feedback, until it "
                        "is satisfied or --max_rounds (docs/interaction.md)")
    p.add_argument("--simulator", default=config.DEFAULT_SIMULATOR,
                   help="with --task interaction: the user simulator's model (Appendix B.4's prompt, "
                        "temperature 0.3, max_tokens 8192, as the release sends it)")
    p.add_argument("--max_rounds", type=positive_int, default=config.DEFAULT_MAX_ROUNDS,
                   help="with --task interaction: the evaluated model's replies at most, each scored by "
                        "the simulator (an unsatisfied dialogue counts at this cap)")
    p.add_argument("--judge_final", action="store_true",
                   help="with --task interaction: the evaluator also judges each finished dialogue's last "
                        "reply (Figure 16's judge, as the generation task judges its response)")
    p.add_argument("--setting", type=setting_argument, default="default", metavar="STRATEGY",
                   help="the context strategy (the paper's word is setting, §4.1): what the model is shown of "
                        "the prior sessions: default (all 8); none (no session); oracle (only the "
                        "sessions with the current preference); summary (Figure 23's summaries); "
                        "oracle_preference (generation given the true preference); recent:k=N (the last N); "
                        "bm25:k=N or dense:k=N (the N closest to the request, oldest first); your own: "
                        "path/file.py:Class, package.module:Class or a cupid.strategies entry point "
                        "(docs/strategies.md). Each strategy has its own results directory")
    p.add_argument("--strategy_model", default=None, metavar="MODEL",
                   help="the LLM a strategy that asks one (uses_model) is given, named as --model is; "
                        "default: the evaluator. Its calls are cached and counted apart (memory cost)")
    p.add_argument("--results_dir", default="results",
                   help="results go to RESULTS_DIR/<model>/ (and /<setting>/ for other settings)")
    source = p.add_argument_group("data (default: the Hugging Face dataset)")
    source.add_argument("--data_dir", help="a directory of instance files (.json/.jsonl/.parquet), e.g. "
                                           "data/sample or the output directory of synthesis.run")
    source.add_argument("--data", help="one data file: .jsonl, .json or .parquet in the dataset's schema")
    source.add_argument("--dataset", default=config.HF_DATASET, help="Hugging Face dataset name")
    source.add_argument("--split", default=config.HF_SPLIT, help="dataset split")
    source.add_argument("--revision", default=None,
                        help="commit, tag or branch of the Hugging Face dataset to load; pin a "
                             "commit for a reproducible study (default: the hub's main branch "
                             "today); recorded in run.json")
    source.add_argument("--download_only", action="store_true",
                        help="load the hub dataset (--dataset, --split, --revision) once, so that a "
                             "copy is stored under HF_HOME, validate it, print where, and stop; "
                             "later runs on that HF_HOME work offline with HF_HUB_OFFLINE=1")
    source.add_argument("--limit", type=positive_int,
                        help="evaluate only the first N instances (every row is still validated)")
    p.add_argument("--n_workers", type=positive_int, default=4, help="instances evaluated at once (threads)")
    p.add_argument("--timeout", type=positive_float, default=config.REQUEST_TIMEOUT,
                   help="seconds one request may take before it is retried")
    p.add_argument("--max_retries", type=non_negative_int, default=config.MAX_RETRIES,
                   help="retries of a request after 429/5xx/timeouts/connection errors (0: none)")
    gen = p.add_argument_group(
        "generation overrides (the run is then not the benchmark's default: its directory and "
        "scorer are named after them, e.g. M[temperature=0.2] in results/M_temperature_0.2_-032a6208/, and run.json records them)")
    gen.add_argument("--seed", type=non_negative_int, default=None,
                     help="sent with every request of every role to providers that take a seed "
                          "(OpenAI, Together, Google, vLLM, the embedded model; not Anthropic)")
    gen.add_argument("--model_args", type=generation_params, default=None, metavar="K=V,...",
                     help="the evaluated model's temperature, max_tokens or seed, replacing what "
                          "each step asks for, e.g. temperature=0.2,max_tokens=1024; and its "
                          "reasoning: reasoning_effort=low (OpenAI reasoning models) or "
                          "thinking_budget=N (Anthropic: 0 or >= 1024; Google: -1 dynamic, 0 off "
                          "where the model allows), checked against the model's family")
    gen.add_argument("--evaluator_args", type=generation_params, default=None, metavar="K=V,...",
                     help="the same for the evaluator (decompose, match, judge)")
    gen.add_argument("--matcher_args", type=generation_params, default=None, metavar="K=V,...",
                     help="the same for PrefMatcher (with --use_matcher)")
    p.add_argument("--no_cache", action="store_true",
                   help="do not keep LLM answers in RESULTS_DIR/.llm_cache/ (the cache lets a "
                        "rerun replay calls that finished, and lets settings share identical calls)")
    p.add_argument("--batch", action="store_true",
                   help="send the OpenAI, Anthropic, Together and Gemini models' calls (evaluated model and evaluator) "
                        "through the providers' batch APIs at half price, in rounds; batch ids are kept "
                        "in the run directory's batches.json, so a rerun resumes them")
    p.add_argument("--rate_limit", action="append", default=[], metavar="[MODEL=]tpm=N,rpm=N,in_flight=N",
                   help="limits to keep on an endpoint (all endpoints, or MODEL's) besides those the "
                        "provider states in its rate-limit headers; repeatable")
    p.add_argument("--sweep", metavar="FILE.yaml",
                   help="a YAML file listing the runs of a sweep (models, settings, options); see "
                        "evaluation/sweep.py")
    p.add_argument("--shard", metavar="I/N",
                   help="evaluate only shard I of N (1 <= I <= N): the instances whose id hashes to I, "
                        "the same split on every machine; shards may share one results directory")
    p.add_argument("--progress_every", type=int, default=0, metavar="K",
                   help="log a progress line (counts, rate, ETA) every K instances; by default every "
                        "~5%% when stderr is not a terminal (nohup, SLURM, CI), never when it is")
    p.add_argument("--log_file", help="also write a detailed log here")
    p.add_argument("--exclude_filtered", action="store_true",
                   help="leave out of results.json's numbers the results read from an answer the "
                        "provider filtered or the model refused (they are counted either way)")
    p.add_argument("--dry_run", action="store_true",
                   help="print what the run would send and cost (calls, tokens, cost online and with "
                        "--batch, time at --rate_limit) per role, without sending or writing anything")
    p.add_argument("--json", action="store_true",
                   help="with --dry_run: also print the forecast as one JSON object on the last line")
    p.add_argument("--list-models", "--list_models", dest="list_models", action="store_true",
                   help="list what can be evaluated: each provider's prefix, the names it claims, its "
                        "families and catalog; registered models and plugins; then exit")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_models:
        from ..utils.models.listing import model_listing

        print(model_listing())
        return 0
    if args.download_only and (args.data or args.data_dir):
        parser.error("--download_only loads the hub dataset; --data and --data_dir are local already")
    if args.download_only:
        return download_only(args)
    if args.json and not args.dry_run:
        parser.error("--json goes with --dry_run")
    from .sweep import sweep_runs

    try:
        runs = sweep_runs(args, parser)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        from . import dry_run

        return dry_run.main(runs, as_json=args.json)
    with SignalGuard():  # between a sweep's runs too
        if len(runs) == 1:
            return run_one(runs[0])[0]
        rows = []
        for number, run in enumerate(runs, start=1):
            print(f"\n=== sweep run {number}/{len(runs)}: {run['model']} [{run['setting']}] ===",
                  file=sys.stderr, flush=True)
            code, results = run_one(run)
            rows.append((run, results, code))
            if code in STOP_CODES or code == STORAGE_EXIT:  # stopped, or the disk refuses
                break
        print_sweep_table(rows)
        return max(code for _, _, code in rows)


def setting_argument(value: str) -> str:
    """--setting, checked (the strategy loaded) as evaluate() checks it."""
    from .strategies import strategy_named

    try:
        strategy_named(value)
    except BadInput as exc:  # argparse names the flag
        raise argparse.ArgumentTypeError(re.sub(r"^setting:? ", "", str(exc))) from None
    return value


def download_only(args: argparse.Namespace) -> int:
    """--download_only: store the hub split's copy for offline runs; no model is needed."""
    from .data import download_dataset

    try:
        print(download_dataset(args.dataset, args.split, args.revision))
    except CupidError as exc:
        return print_error(exc, f"bad data: {exc}" if isinstance(exc, BadInput) else None)
    return 0


def run_one(arguments: dict) -> tuple[int, dict | None]:
    """One run through ``evaluate()``: its exit status and results (None when it stopped first)."""
    from .api import evaluate

    try:
        run = evaluate(**arguments)
    except Interrupted as exc:
        if exc.results is not None:
            show(exc.results, exc.results_path)
        print(redact(exc.message), file=sys.stderr)
        return exit_now(exc.exit_code), exc.results
    except CupidError as exc:
        return exit_now(print_error(exc)), None
    show(run.results, run.run_dir / "results.json")
    return (1 if run.failed else 0), run.results


def show(results: dict, path) -> None:
    """The summary of a run's results (the interactive task's its own)."""
    if results.get("task") == "interaction":
        print_interaction_summary(results, path)
    else:
        print_summary(results, path)


def console() -> None:
    """The console script ``cupid-eval``."""
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:  # during setup, before any instance started
        print(f"\n{stop_cause(exc)} before any work; nothing to resume", file=sys.stderr)
        sys.exit(stop_status(exc))


if __name__ == "__main__":
    console()
