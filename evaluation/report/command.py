"""Report over a results directory: tables in the paper's layout with bootstrap CIs,
paired differences, failure counts, the paper's published numbers next to ours, and
the figures (P/R/F1 bars, Figures 3, 4, 5 and 9).

The command line of ``cupid-report`` (``python -m evaluation.report``); docs/report.md says
what it writes, --export's rows and --error_types' classification.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ... import config
from . import error_types, interaction_section
from .build import build_report
from .export import export_format, push_to_hub, write_samples
from .format import DEFAULT_MIN_BIN_SIZE
from .statistics import DEFAULT_N_BOOTSTRAP
from ...utils.command_line import Parser, non_negative_int, positive_int, program_name
from ...utils.errors import BadInput, SetupError
from ...utils.executor import exit_now
from ...utils.io import StorageError, describe_os_error


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=program_name("python -m cupid.evaluation.report"), description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", help="a results directory (searched recursively for run.json)")
    parser.add_argument("--output", default=None, help="where to write report.md, report.csv and the "
                                                       "figures (default: RESULTS_DIR)")
    parser.add_argument("--n_bootstrap", type=positive_int, default=DEFAULT_N_BOOTSTRAP,
                        help="bootstrap resamples for the confidence intervals (default 1000)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--n_length_bins", type=positive_int, default=5,
                        help="equal-size bins of history length for Figure 9 (default 5)")
    parser.add_argument("--min_bin_size", type=positive_int, default=DEFAULT_MIN_BIN_SIZE,
                        help="fewest instances behind a figure's bin or point before it is merged "
                             f"(Figure 9) or drawn hollow (default {DEFAULT_MIN_BIN_SIZE})")
    parser.add_argument("--no_figures", action="store_true", help="write report.md and report.csv only")
    parser.add_argument("--no_html", action="store_true", help="do not write report.html")
    parser.add_argument("--exclude_filtered", action="store_true",
                        help="leave out of every number the results read from an answer the provider "
                             "filtered or the model refused (they are flagged either way)")
    parser.add_argument("--data_dir", "--data", dest="data", action="append", default=None,
                        help="the instances the runs evaluated, for report.html's sessions and ground "
                             "truth (default: each run.json's data_source)")
    parser.add_argument("--export", metavar="FILE", default=None,
                        help="write one row per (model, setting, scorer, instance) to FILE (.jsonl, "
                             ".parquet or .csv) instead of the report")
    parser.add_argument("--push_to_hub", metavar="REPO_ID", default=None,
                        help="upload the same rows as a Hugging Face dataset (needs a hub token; "
                             "not exercised by the tests)")
    errors = parser.add_argument_group("error types (Table 2)", "the evaluator classifies why the low-F1 "
                                       "default-setting inferences missed, before the report is written")
    errors.add_argument("--error_types", "--error-types", action="store_true",
                        help="draw and classify the inferences (resumes: done ones are read back)")
    errors.add_argument("--evaluator", default=config.DEFAULT_EVALUATOR,
                        help=f"the classifier, at temperature 0 (default {config.DEFAULT_EVALUATOR})")
    errors.add_argument("--error_f1_below", type=float, default=100 * error_types.F1_BELOW, metavar="PERCENT",
                        help="classify inferences whose F1 is below this (default 20, the paper's)")
    errors.add_argument("--error_per_model", type=positive_int, default=error_types.PER_MODEL,
                        help="at most this many per model (default 50, the paper's)")
    errors.add_argument("--error_seed", type=int, default=0, help="seed of the draw (default 0)")
    errors.add_argument("--n_workers", type=positive_int, default=4, help="classifications in parallel (default 4)")
    errors.add_argument("--batch", action="store_true", help="through the provider's batch API at its price")
    args = parser.parse_args(argv)
    if not 0 < args.error_f1_below <= 100:
        parser.error("--error_f1_below must be in (0, 100]")
    if not Path(args.results_dir).is_dir():
        parser.error(f"{args.results_dir}: not a directory")
    if args.export or args.push_to_hub:
        return export_samples(args, parser)
    if args.error_types:
        status = classify_error_types(args)
        if status:
            return status
    try:
        files = build_report(args.results_dir, args.output, n_bootstrap=args.n_bootstrap, seed=args.seed,
                             n_length_bins=args.n_length_bins, min_bin_size=args.min_bin_size,
                             figures=not args.no_figures, html=not args.no_html, data_paths=args.data,
                             exclude_filtered=args.exclude_filtered)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # disk full, read-only, permission denied: one line, no traceback
        return write_failed(exc, args.output or args.results_dir, "the results are untouched (the "
                            "report only reads them): make room, or give a writable --output, and "
                            "run the report again")
    for path in [files.markdown, *([files.csv] if files.csv else []), *files.exports, *files.figures,
                 *([files.html] if files.html else [])]:
        print(f"wrote {path}")
    for note in files.analysis.ignored:
        print(f"note: {note}")
    if files.gaps:
        print(f"\nNot in this report ({len(files.gaps)}; see report.md, \"What this report cannot show yet\"):")
        for gap in files.gaps:
            print("\n".join(gap.lines()))
    return 0


def classify_error_types(args) -> int:
    """Run the classification; 0 when the report may follow, else the exit status."""
    try:
        lines = error_types.classify(args.results_dir, evaluator=args.evaluator, f1_below=args.error_f1_below / 100,
                                     per_model=args.error_per_model, seed=args.error_seed, n_workers=args.n_workers,
                                     batch=args.batch, data_paths=args.data)
    except (BadInput, SetupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"stopped: every classification finished so far is saved under {args.results_dir}; rerun the "
              f"same command to resume", file=sys.stderr)
        return exit_now(130)  # a call still hung in a worker thread does not hold the exit
    except OSError as exc:
        return write_failed(exc, args.results_dir, "every classification written before it is kept: make room "
                            "and run the same command again")
    for line in lines:
        print(line)
    return 0


def write_failed(exc: OSError, path: object, advice: str) -> int:
    """A write that failed (disk full, read-only, permission denied): one line, no
    traceback, exit status 1."""
    what = exc if isinstance(exc, StorageError) else \
        f"{exc.filename or path}: cannot write: {describe_os_error(exc)}"
    print(f"error: {what}; {advice}", file=sys.stderr)
    return 1


def export_samples(args, parser: argparse.ArgumentParser) -> int:
    from ..sample_rows import sample_rows

    if args.export:
        try:
            export_format(args.export)
        except ValueError as exc:
            parser.error(str(exc))
    notes: list[str] = []
    rows = sample_rows(args.results_dir, data_paths=args.data, notes=notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    dialogues = interaction_section.sample_rows(Path(args.results_dir))
    if dialogues and args.export:  # their own file: one row a dialogue, other columns
        target = Path(args.export)
        target = target.with_name(f"{target.stem}.interaction{target.suffix}")
        try:
            print(f"wrote {write_samples(dialogues, target)} ({len(dialogues)} dialogues)")
        except OSError as exc:
            return write_failed(exc, target, "the results are untouched: make room, or export "
                                "to a writable path, and run it again")
    if not rows and dialogues and args.export:
        return 0
    if not rows:
        print(f"error: {args.results_dir}: no evaluation run found (no run.json with instance files)",
              file=sys.stderr)
        return 1
    if args.export:
        try:
            path = write_samples(rows, args.export)
        except OSError as exc:
            return write_failed(exc, args.export, "the results are untouched: make room, or export "
                                "to a writable path, and run it again")
        print(f"wrote {path} ({len(rows)} rows)")
    if args.push_to_hub:
        push_to_hub(rows, args.push_to_hub)
        print(f"pushed {len(rows)} rows to {args.push_to_hub}")
    return 0


def console() -> None:
    """The console script ``cupid-report``."""
    sys.exit(main())
