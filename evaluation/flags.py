"""The flags of ``python -m evaluation.run`` and what they turn into: the parser, each
role's generation overrides, a bundled data path, the log's handlers, one-line errors."""
from __future__ import annotations

import argparse
import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from cupid import config
from cupid.evaluation.pipeline import TASKS
from cupid.evaluation.store import SETTINGS
from cupid.utils.command_line import Parser, generation_params, non_negative_int, positive_float, positive_int, program_name
from cupid.utils.io import open_log_file
from cupid.utils.redact import RedactingFormatter, redact


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=program_name("python -m evaluation.run"),
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
    p.add_argument("--task", choices=TASKS, default="inference",
                   help="inference: infer the preference; generation: answer the request; both")
    p.add_argument("--setting", choices=SETTINGS, default="default",
                   help="default: all 8 prior sessions; oracle: only the sessions with the current "
                        "preference; summary: summarize each session first (Figure 23) and work from the "
                        "summaries; oracle_preference: generation given the true preference. Each "
                        "setting has its own results directory")
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
    p.add_argument("--dry_run", action="store_true",
                   help="print what the run would send and cost (calls, tokens, cost online and with "
                        "--batch, time at --rate_limit) per role, without sending or writing anything")
    p.add_argument("--json", action="store_true",
                   help="with --dry_run: also print the forecast as one JSON object on the last line")
    return p


def setup_logging(log_file: str | None) -> None:
    root = logging.getLogger("cupid")
    root.setLevel(logging.INFO)
    root.handlers.clear()
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.ERROR)
    console.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
    root.addHandler(console)
    if log_file:
        handler = open_log_file(log_file)
        handler.setLevel(logging.INFO)
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.addHandler(handler)


def bundled_path(path: str | None) -> str | None:
    """A relative data path that does not exist here but names a file shipped with the
    project (``data/sample``) resolves to the installed copy, so the README's commands work
    from any directory."""
    if path is None or Path(path).is_absolute() or Path(path).exists():
        return path
    shipped = config.ROOT / path
    return str(shipped) if shipped.exists() else path


def role_overrides(args: argparse.Namespace) -> dict[str, dict]:
    """Each role's generation overrides: --seed for every role, then the role's own
    --*_args (which win). Empty when the user chose none: the benchmark's parameters."""
    seed = {} if args.seed is None else {"seed": args.seed}
    return {"evaluated": {**seed, **(args.model_args or {})},
            "evaluator": {**seed, **(args.evaluator_args or {})},
            "matcher": {**seed, **(args.matcher_args or {})}}


_error_sinks: list[list[str]] = []


def error(message: str) -> None:
    """One line on stderr, with every known key redacted (and kept for the Python API,
    which raises it)."""
    line = redact(f"error: {message}")
    for sink in _error_sinks:
        sink.append(line)
    print(line, file=sys.stderr)


@contextmanager
def collected_errors() -> Iterator[list[str]]:
    """The error lines printed while the block runs."""
    sink: list[str] = []
    _error_sinks.append(sink)
    try:
        yield sink
    finally:
        _error_sinks.remove(sink)


def flag_conflict(args: argparse.Namespace) -> str | None:
    """Why these flags cannot go together, or None (checked for the command line and for
    each run of a sweep file before anything runs)."""
    if args.setting == "oracle_preference" and args.task != "generation":
        return "--setting oracle_preference applies to --task generation only"
    if args.matcher_args and not args.use_matcher:
        return "--matcher_args needs --use_matcher"
    if args.batch and args.no_cache:
        return "--batch keeps the batches' answers in the cache; drop --no_cache"
    return None
